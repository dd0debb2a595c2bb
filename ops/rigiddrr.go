package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// RigidDRR is the Gorgonia op that renders the DRRs of a volume moved by a
// rigid transform, and is differentiable with respect to the transform's
// six parameters: its input is the vector (ω, t), a rotation vector in
// radians about Center and a translation in mm (package rigid), its output
// the images of every view, (Views, Rows, Cols) float64, of the volume
// moved by T(x) = R(ω)(x − Center) + Center + t. Views are poses as DRR
// takes them (PoseWidth numbers each, world mm). Step ≤ 0 renders by
// Siddon's exact path, Step > 0 by trilinear samples, as DRR does.
//
// Moving the volume by T renders as the volume as read seen along the rays
// moved by T⁻¹, which keeps every ray's length, so a ray's line integral
// depends on T only through its two end points: the kernel returns its
// derivatives with respect to them, and T⁻¹'s derivatives carry those to
// the six parameters. Trilinear images are differentiable everywhere but
// on the measure-zero set where a sample crosses a voxel plane; Siddon's,
// except where a ray passes through a voxel edge or corner.
//
// The derivatives are computed in the same pass as the images when a
// gradient was asked for (SymDiff), and the backward op reads them.
type RigidDRR struct {
	owned
	stoppable

	Vol        *volume.Volume
	Views      []float64
	Rows, Cols int
	Step       float64
	Center     [3]float64

	kern     rayKernels // nil: the CPU
	geom     rayGeom
	wantGrad bool // SymDiff was called: render derivatives too
	out      *tensor.Dense
	kvol     *volume.Volume
	lref     []float64 // per view: its longest ray
	src, dst []float64 // the rays as rendered: T⁻¹ of the world's, in the volume's frame
	gsrc     []float64 // ∂image/∂(ray's ends), volume frame
	gdst     []float64
	theta    [6]float64 // of the images in out
	haveGrad bool       // gsrc and gdst belong to theta
	rendered bool
}

// NewRigidDRR returns the op for the views (a whole number of poses).
func NewRigidDRR(vol *volume.Volume, views []float64, rows, cols int, step float64, center [3]float64) (*RigidDRR, error) {
	if rows < 1 || cols < 1 || len(views) == 0 || len(views)%PoseWidth != 0 {
		return nil, fmt.Errorf("rigid drr: want rows, cols ≥ 1 and a whole number of %d-number poses, got %d×%d and %d numbers", PoseWidth, rows, cols, len(views))
	}
	op := &RigidDRR{Vol: vol, Views: views, Rows: rows, Cols: cols, Step: step, Center: center}
	op.lref = make([]float64, op.NumViews())
	for v := range op.lref {
		op.lref[v] = LongestRay(views[v*PoseWidth:], rows, cols)
	}
	return op, nil
}

// NumViews is the number of views.
func (op *RigidDRR) NumViews() int { return len(op.Views) / PoseWidth }

func (op *RigidDRR) rays() int { return op.NumViews() * op.Rows * op.Cols }

// Arity is 1: the six parameters.
func (op *RigidDRR) Arity() int { return 1 }

// Type is Vector float64 → Tensor3 float64.
func (op *RigidDRR) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 1, Of: tensor.Float64}, G.TensorType{Dims: 3, Of: tensor.Float64})
}

// InferShape is (Views, Rows, Cols).
func (op *RigidDRR) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("rigid drr: want 1 input, got %d", len(in))
	}
	if s, ok := in[0].(tensor.Shape); ok && s.TotalSize() != 6 {
		return nil, fmt.Errorf("rigid drr: parameters of shape %v, want (6)", s)
	}
	return tensor.Shape{op.NumViews(), op.Rows, op.Cols}, nil
}

func params(v G.Value, who string) ([6]float64, error) {
	var p [6]float64
	d, ok := v.(*tensor.Dense)
	if !ok || d.Dtype() != tensor.Float64 || d.Shape().TotalSize() != 6 {
		return p, fmt.Errorf("%s: parameters %v, want 6 float64", who, v.Shape())
	}
	copy(p[:], d.Data().([]float64))
	return p, nil
}

// Do renders the images of the volume moved by the parameters.
func (op *RigidDRR) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("rigid drr: want 1 input, got %d", len(in))
	}
	p, err := params(in[0], "rigid drr")
	if err != nil {
		return nil, err
	}
	if err := op.render(p, op.wantGrad); err != nil {
		return nil, err
	}
	return op.out, nil
}

// Transform is the transform of parameters p.
func (op *RigidDRR) Transform(p []float64) rigid.Transform {
	return rigid.Transform{Center: op.Center}.WithParams(p)
}

// render fills out (and the derivatives when grad) for parameters p.
func (op *RigidDRR) render(p [6]float64, grad bool) error {
	for _, x := range p {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("rigid drr: a parameter is not finite: %v", p)
		}
	}
	n := op.rays()
	if op.out == nil {
		op.out = opkit.NewOwned(tensor.Float64, op.NumViews(), op.Rows, op.Cols)
		op.src, op.dst = make([]float64, 3*n), make([]float64, 3*n)
		op.kvol = op.kernelVolume()
		op.geom = rayGeom{kvol: op.kvol, kgrid: kernelGrid(op.kvol), src: op.src, dst: op.dst, lref: op.lref, views: op.NumViews(), rows: op.Rows, cols: op.Cols, step: op.Step, volGen: 1}
	}
	if grad && op.gsrc == nil {
		op.gsrc, op.gdst = make([]float64, 3*n), make([]float64, 3*n)
	}
	inv := rigid.NewInverse(op.Transform(p[:]))
	v := op.Vol
	for b := range op.NumViews() {
		pose := op.Views[b*PoseWidth:][:PoseWidth]
		s := v.ToLocal(inv.Apply([3]float64(pose[0:3])))
		for r := range op.Rows {
			for c := range op.Cols {
				var w [3]float64
				for a := range 3 {
					w[a] = pose[3+a] + float64(c)*pose[6+a] + float64(r)*pose[9+a]
				}
				i := 3 * ((b*op.Rows+r)*op.Cols + c)
				*(*[3]float64)(op.src[i:]) = s
				*(*[3]float64)(op.dst[i:]) = v.ToLocal(inv.Apply(w))
			}
		}
	}
	op.geom.rayGen++
	var gs, gd []float64
	if grad {
		gs, gd = op.gsrc, op.gdst
	}
	if err := op.kernels().cast(&op.geom, op.out.Data().([]float64), gs, gd, op.Stopped); err != nil {
		op.rendered, op.haveGrad = false, false
		return fmt.Errorf("rigid drr: %w", err)
	}
	if op.Stopped() {
		op.rendered, op.haveGrad = false, false
		return ErrStopped
	}
	op.theta, op.rendered, op.haveGrad = p, true, grad
	return nil
}

// kernels is where the op's rays are cast: the CPU unless OnDevice put
// the op on a GPU.
func (op *RigidDRR) kernels() rayKernels {
	if op.kern == nil {
		op.kern = &cpuRays{}
	}
	return op.kern
}

// kernelVolume is Vol in its own frame, padded for trilinear sampling.
func (op *RigidDRR) kernelVolume() *volume.Volume {
	v := op.Vol
	if !v.Aligned() {
		v = v.Local()
	}
	if op.Step > 0 {
		v = volume.Pad(v)
	}
	return v
}

// VJP returns Σ_ray upstream[ray]·∂image[ray]/∂p, the gradient of a loss
// with respect to the parameters p given its gradient upstream with
// respect to the images, rendering again only if the images in hand are
// not those of p.
func (op *RigidDRR) VJP(p [6]float64, upstream []float64) ([6]float64, error) {
	var g [6]float64
	if len(upstream) != op.rays() {
		return g, fmt.Errorf("rigid drr: upstream gradient of %d values, want %d", len(upstream), op.rays())
	}
	if !op.haveGrad || op.theta != p {
		if err := op.render(p, true); err != nil {
			return g, err
		}
	}
	inv := rigid.NewInverse(op.Transform(p[:]))
	d := op.Vol.Dir()
	toWorld := func(x []float64, u float64) [3]float64 {
		var y [3]float64
		for a := range 3 {
			y[a] = u * (d[a][0]*x[0] + d[a][1]*x[1] + d[a][2]*x[2])
		}
		return y
	}
	for b := range op.NumViews() {
		pose := op.Views[b*PoseWidth:][:PoseWidth]
		var sumSrc [3]float64
		for r := range op.Rows {
			for c := range op.Cols {
				k := (b*op.Rows+r)*op.Cols + c
				u := upstream[k]
				if u == 0 {
					continue
				}
				gs := toWorld(op.gsrc[3*k:], u)
				for a := range 3 {
					sumSrc[a] += gs[a]
				}
				var w [3]float64
				for a := range 3 {
					w[a] = pose[3+a] + float64(c)*pose[6+a] + float64(r)*pose[9+a]
				}
				q := inv.Pullback(w, toWorld(op.gdst[3*k:], u))
				for j := range 6 {
					g[j] += q[j]
				}
			}
		}
		q := inv.Pullback([3]float64(pose[0:3]), sumSrc)
		for j := range 6 {
			g[j] += q[j]
		}
	}
	return g, nil
}

// Jacobian returns ∂image/∂p, one row of six per pixel (views, rows,
// cols in order), and the images.
func (op *RigidDRR) Jacobian(p [6]float64) (jac, img []float64, err error) {
	jac = make([]float64, 6*op.rays())
	if err := op.render(p, true); err != nil {
		return nil, nil, err
	}
	inv := rigid.NewInverse(op.Transform(p[:]))
	d := op.Vol.Dir()
	for b := range op.NumViews() {
		pose := op.Views[b*PoseWidth:][:PoseWidth]
		for r := range op.Rows {
			for c := range op.Cols {
				k := (b*op.Rows+r)*op.Cols + c
				var gs, gd, w [3]float64
				for a := range 3 {
					gs[a] = d[a][0]*op.gsrc[3*k] + d[a][1]*op.gsrc[3*k+1] + d[a][2]*op.gsrc[3*k+2]
					gd[a] = d[a][0]*op.gdst[3*k] + d[a][1]*op.gdst[3*k+1] + d[a][2]*op.gdst[3*k+2]
					w[a] = pose[3+a] + float64(c)*pose[6+a] + float64(r)*pose[9+a]
				}
				q1 := inv.Pullback([3]float64(pose[0:3]), gs)
				q2 := inv.Pullback(w, gd)
				for j := range 6 {
					jac[6*k+j] = q1[j] + q2[j]
				}
			}
		}
	}
	img = append([]float64(nil), op.out.Data().([]float64)...)
	return jac, img, nil
}

// DiffWRT is [true]: the parameters.
func (op *RigidDRR) DiffWRT(inputs int) []bool { return []bool{true} }

// SymDiff returns the gradient with respect to the parameters: the
// backward op applied to them and the images' gradient.
func (op *RigidDRR) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("rigid drr: want 1 input, got %d", len(inputs))
	}
	op.wantGrad = true
	n, err := G.ApplyOp(&rigidDRRGrad{fwd: op}, inputs[0], grad)
	if err != nil {
		return nil, fmt.Errorf("rigid drr: %w", err)
	}
	return G.Nodes{n}, nil
}

// ResidentBytes counts the volume (padded for trilinear), the rays and the
// derivatives.
func (op *RigidDRR) ResidentBytes() int64 {
	n := int64(op.rays())
	b := 4*int64(len(op.Vol.V)) + 8*n + 48*n
	if op.wantGrad {
		b += 48 * n
	}
	if op.Step > 0 {
		b += 4 * (op.Vol.N[0] + 2) * (op.Vol.N[1] + 2) * (op.Vol.N[2] + 2)
	}
	return b
}

// WriteHash writes every parameter of the op, and the device it runs on
// (nothing for the CPU).
func (op *RigidDRR) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "rigiddrr(vol=%p,N=%v,views=%p/%d,rows=%d,cols=%d,step=%g,center=%v)", op.Vol, op.Vol.N, op.Views, len(op.Views), op.Rows, op.Cols, op.Step, op.Center)
	if d := op.kernels().device(); d != "" {
		fmt.Fprintf(h, "@%s", d)
	}
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *RigidDRR) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *RigidDRR) String() string {
	method := rayMethod(op.Step)
	s := fmt.Sprintf("RigidDRR{%dx%dx%d volume, %d views of %dx%d, %s}", op.Vol.N[0], op.Vol.N[1], op.Vol.N[2], op.NumViews(), op.Rows, op.Cols, method)
	if d := op.kernels().device(); d != "" {
		s += "@" + d
	}
	return s
}

// rigidDRRGrad is RigidDRR's backward op: (parameters, ∂loss/∂images) →
// ∂loss/∂parameters, from the derivatives its forward op rendered.
type rigidDRRGrad struct {
	owned
	fwd *RigidDRR
	out *tensor.Dense
}

func (op *rigidDRRGrad) Arity() int { return 2 }

func (op *rigidDRRGrad) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 1, Of: tensor.Float64}, G.TensorType{Dims: 3, Of: tensor.Float64}, G.TensorType{Dims: 1, Of: tensor.Float64})
}

func (op *rigidDRRGrad) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{6}, nil
}

func (op *rigidDRRGrad) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("rigid drr gradient: want 2 inputs, got %d", len(in))
	}
	p, err := params(in[0], "rigid drr gradient")
	if err != nil {
		return nil, err
	}
	up, ok := in[1].(*tensor.Dense)
	if !ok || up.Dtype() != tensor.Float64 {
		return nil, fmt.Errorf("rigid drr gradient: the images' gradient is %T, want float64", in[1])
	}
	g, err := op.fwd.VJP(p, up.Data().([]float64))
	if err != nil {
		return nil, err
	}
	if op.out == nil {
		op.out = opkit.NewOwned(tensor.Float64, 6)
	}
	copy(op.out.Data().([]float64), g[:])
	return op.out, nil
}

func (op *rigidDRRGrad) WriteHash(h hash.Hash) {
	fmt.Fprint(h, "grad:")
	op.fwd.WriteHash(h)
}

func (op *rigidDRRGrad) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *rigidDRRGrad) String() string { return "∂" + op.fwd.String() }
