package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// Project is the Gorgonia op that renders DRRs as a linear map of the
// volume's values: its input is the values of a volume on Vol's grid,
// (N[0], N[1], N[2]) float64 in C order, which stand for Vol.V (Vol's
// shape, spacing, origin and direction place them; Vol.V is not read), its
// output the line integrals of every view, (Views, Rows, Cols) float64.
// Views are poses as DRR takes them (PoseWidth numbers each, world mm);
// Step ≤ 0 casts Siddon's exact path, Step > 0 trilinear samples (the
// volume padded by a border of zero voxels), as DRR does, with the
// kernels of RigidDRR at the identity (cpukern.DRRGrad): the values are
// rounded to float32, the volume's type, and the integrals summed in
// float64.
//
// Project is differentiable with respect to the values: its gradient is
// the adjoint map, the back-projection of the images' gradient
// (cpukern.DRRBackProject), which SymDiff builds.
type Project struct {
	owned
	stoppable

	Vol        *volume.Volume
	Views      []float64
	Rows, Cols int
	Step       float64

	kern  rayKernels // nil: the CPU
	geom  rayGeom
	out   *tensor.Dense
	kgrad []float64 // the adjoint of a padded volume, border included
}

// NewProject returns the op for the views (a whole number of poses).
func NewProject(vol *volume.Volume, views []float64, rows, cols int, step float64) (*Project, error) {
	if rows < 1 || cols < 1 || len(views) == 0 || len(views)%PoseWidth != 0 {
		return nil, fmt.Errorf("project: want rows, cols ≥ 1 and a whole number of %d-number poses, got %d×%d and %d numbers", PoseWidth, rows, cols, len(views))
	}
	if vol.N[0] < 1 || vol.N[1] < 1 || vol.N[2] < 1 || vol.Padded {
		return nil, fmt.Errorf("project: a volume of shape %v (padded %v), want an unpadded one of at least one voxel", vol.N, vol.Padded)
	}
	return &Project{Vol: vol, Views: views, Rows: rows, Cols: cols, Step: step}, nil
}

// NumViews is the number of views.
func (op *Project) NumViews() int { return len(op.Views) / PoseWidth }

func (op *Project) voxels() int { return int(op.Vol.N[0] * op.Vol.N[1] * op.Vol.N[2]) }

// kernels is where the op's rays are cast: the CPU unless OnDevice put
// the op on a GPU.
func (op *Project) kernels() rayKernels {
	if op.kern == nil {
		op.kern = &cpuRays{}
	}
	return op.kern
}

// prepare makes, once, the kernels' volume (its values zero) and the
// rays, in the volume's own frame.
func (op *Project) prepare() {
	if op.geom.kvol != nil {
		return
	}
	v := op.Vol
	l := v.Local()
	kv := &volume.Volume{N: v.N, Origin: v.Origin, Spacing: v.Spacing}
	if op.Step > 0 {
		kv = &volume.Volume{N: [3]int64{v.N[0] + 2, v.N[1] + 2, v.N[2] + 2}, Origin: l.World([3]float64{-1, -1, -1}), Spacing: v.Spacing, Padded: true}
	}
	kv.V = make([]float32, kv.N[0]*kv.N[1]*kv.N[2])
	nv, per := op.NumViews(), op.Rows*op.Cols
	g := rayGeom{kvol: kv, kgrid: kernelGrid(kv), src: make([]float64, 3*nv*per), dst: make([]float64, 3*nv*per), lref: make([]float64, nv),
		views: nv, rows: op.Rows, cols: op.Cols, step: op.Step, volGen: 1, rayGen: 1}
	for b := range nv {
		pose := op.Views[b*PoseWidth:][:PoseWidth]
		g.lref[b] = LongestRay(pose, op.Rows, op.Cols)
		s := v.ToLocal([3]float64(pose[0:3]))
		for r := range op.Rows {
			for c := range op.Cols {
				var w [3]float64
				for a := range 3 {
					w[a] = pose[3+a] + float64(c)*pose[6+a] + float64(r)*pose[9+a]
				}
				i := 3 * ((b*op.Rows+r)*op.Cols + c)
				*(*[3]float64)(g.src[i:]) = s
				*(*[3]float64)(g.dst[i:]) = v.ToLocal(w)
			}
		}
	}
	op.geom = g
}

// Arity is 1: the volume's values.
func (op *Project) Arity() int { return 1 }

// Type is Tensor3 float64 → Tensor3 float64.
func (op *Project) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 3, Of: tensor.Float64}, G.TensorType{Dims: 3, Of: tensor.Float64})
}

// InferShape is (Views, Rows, Cols).
func (op *Project) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("project: want 1 input, got %d", len(in))
	}
	n := op.Vol.N
	if s, ok := in[0].(tensor.Shape); ok && !s.Eq(tensor.Shape{int(n[0]), int(n[1]), int(n[2])}) {
		return nil, fmt.Errorf("project: values of shape %v, want %v", s, n)
	}
	return tensor.Shape{op.NumViews(), op.Rows, op.Cols}, nil
}

// Do renders the images of the values in[0] into the op's own buffer.
func (op *Project) Do(in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("project: want 1 input, got %d", len(in))
	}
	x, ok := in[0].(*tensor.Dense)
	if !ok || x.Dtype() != tensor.Float64 || x.Shape().TotalSize() != op.voxels() {
		return nil, fmt.Errorf("project: values %v, want float64 %v", in[0].Shape(), op.Vol.N)
	}
	if err := op.Render(x.Data().([]float64)); err != nil {
		return nil, err
	}
	return op.out, nil
}

// Render renders the images of the values x (N[0]·N[1]·N[2], C order) into
// the op's output, which it returns with Output.
func (op *Project) Render(x []float64) error {
	if len(x) != op.voxels() {
		return fmt.Errorf("project: %d values, want %d", len(x), op.voxels())
	}
	op.prepare()
	if op.out == nil {
		op.out = opkit.NewOwned(tensor.Float64, op.NumViews(), op.Rows, op.Cols)
	}
	kv, n := op.geom.kvol, op.Vol.N
	if !kv.Padded {
		for i, f := range x {
			kv.V[i] = float32(f)
		}
	} else {
		ny, nz := kv.N[1], kv.N[2]
		for i := range n[0] {
			for j := range n[1] {
				row := x[(i*n[1]+j)*n[2]:][:n[2]]
				dst := kv.V[((i+1)*ny+j+1)*nz+1:][:n[2]]
				for k, f := range row {
					dst[k] = float32(f)
				}
			}
		}
	}
	op.geom.volGen++
	if err := op.kernels().cast(&op.geom, op.out.Data().([]float64), nil, nil, op.Stopped); err != nil {
		return fmt.Errorf("project: %w", err)
	}
	if op.Stopped() {
		return ErrStopped
	}
	return nil
}

// Output is the op's output buffer, (Views, Rows, Cols); nil before the
// first Render.
func (op *Project) Output() *tensor.Dense { return op.out }

// Adjoint sets dst (N[0]·N[1]·N[2] values, C order) to the adjoint map of
// up (Views·Rows·Cols values): Σ_ray up[ray]·∂image[ray]/∂values, the
// gradient with respect to the values of Σ up ⊙ images.
func (op *Project) Adjoint(dst, up []float64) error {
	if len(dst) != op.voxels() || len(up) != op.NumViews()*op.Rows*op.Cols {
		return fmt.Errorf("project adjoint: %d values and %d gradients, want %d and %d", len(dst), len(up), op.voxels(), op.NumViews()*op.Rows*op.Cols)
	}
	op.prepare()
	kv := op.geom.kvol
	if !kv.Padded {
		if err := op.kernels().backProject(&op.geom, up, dst); err != nil {
			return fmt.Errorf("project adjoint: %w", err)
		}
		return nil
	}
	if op.kgrad == nil {
		op.kgrad = make([]float64, len(kv.V))
	}
	if err := op.kernels().backProject(&op.geom, up, op.kgrad); err != nil {
		return fmt.Errorf("project adjoint: %w", err)
	}
	n, ny, nz := op.Vol.N, kv.N[1], kv.N[2]
	for i := range n[0] {
		for j := range n[1] {
			copy(dst[(i*n[1]+j)*n[2]:][:n[2]], op.kgrad[((i+1)*ny+j+1)*nz+1:][:n[2]]) // the border is not a value
		}
	}
	return nil
}

// DiffWRT is [true]: the values.
func (op *Project) DiffWRT(inputs int) []bool { return []bool{true} }

// SymDiff returns the gradient with respect to the values: the adjoint
// op applied to the images' gradient.
func (op *Project) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("project: want 1 input, got %d", len(inputs))
	}
	n, err := G.ApplyOp(&projectAdjoint{fwd: op}, grad)
	if err != nil {
		return nil, fmt.Errorf("project: %w", err)
	}
	return G.Nodes{n}, nil
}

// ResidentBytes counts the kernels' volume (padded for trilinear), the
// rays, and the adjoint's partial sums.
func (op *Project) ResidentBytes() int64 {
	n := int64(op.NumViews() * op.Rows * op.Cols)
	kv := op.voxels()
	if op.Step > 0 {
		kv = int(op.Vol.N[0]+2) * int(op.Vol.N[1]+2) * int(op.Vol.N[2]+2)
	}
	b := 4*int64(kv) + 48*n
	if _, cpu := op.kernels().(*cpuRays); cpu {
		b += backPartBytes(kv)
	}
	if op.Step > 0 {
		b += 8 * int64(kv)
	}
	return b
}

// WriteHash writes every parameter of the op, and the device it runs on
// (nothing for the CPU).
func (op *Project) WriteHash(h hash.Hash) {
	v := op.Vol
	fmt.Fprintf(h, "project(vol=%p,N=%v,spacing=%v,origin=%v,dir=%v,views=%p/%d,rows=%d,cols=%d,step=%g)", v, v.N, v.Spacing, v.Origin, v.Dir(),
		op.Views, len(op.Views), op.Rows, op.Cols, op.Step)
	if d := op.kernels().device(); d != "" {
		fmt.Fprintf(h, "@%s", d)
	}
}

// Hashcode is the FNV-1a hash of WriteHash.
func (op *Project) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *Project) String() string {
	method := rayMethod(op.Step)
	s := fmt.Sprintf("Project{%dx%dx%d values, %d views of %dx%d, %s}", op.Vol.N[0], op.Vol.N[1], op.Vol.N[2], op.NumViews(), op.Rows, op.Cols, method)
	if d := op.kernels().device(); d != "" {
		s += "@" + d
	}
	return s
}

// projectAdjoint is Project's backward op: the images' gradient
// (Views, Rows, Cols) → the values' gradient (N[0], N[1], N[2]), in its
// own buffer.
type projectAdjoint struct {
	owned
	fwd *Project
	out *tensor.Dense
}

func (op *projectAdjoint) Arity() int { return 1 }

func (op *projectAdjoint) Type() hm.Type {
	return hm.NewFnType(G.TensorType{Dims: 3, Of: tensor.Float64}, G.TensorType{Dims: 3, Of: tensor.Float64})
}

func (op *projectAdjoint) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	n := op.fwd.Vol.N
	return tensor.Shape{int(n[0]), int(n[1]), int(n[2])}, nil
}

func (op *projectAdjoint) Do(in ...G.Value) (G.Value, error) {
	f := op.fwd
	if len(in) != 1 {
		return nil, fmt.Errorf("project adjoint: want 1 input, got %d", len(in))
	}
	up, ok := in[0].(*tensor.Dense)
	if !ok || up.Dtype() != tensor.Float64 || up.Shape().TotalSize() != f.NumViews()*f.Rows*f.Cols {
		return nil, fmt.Errorf("project adjoint: the images' gradient %v, want float64 (%d, %d, %d)", in[0].Shape(), f.NumViews(), f.Rows, f.Cols)
	}
	if op.out == nil {
		n := f.Vol.N
		op.out = opkit.NewOwned(tensor.Float64, int(n[0]), int(n[1]), int(n[2]))
	}
	if err := f.Adjoint(op.out.Data().([]float64), up.Data().([]float64)); err != nil {
		return nil, err
	}
	return op.out, nil
}

func (op *projectAdjoint) WriteHash(h hash.Hash) {
	fmt.Fprint(h, "adjoint:")
	op.fwd.WriteHash(h)
}

func (op *projectAdjoint) Hashcode() uint32 { return opkit.Hashcode(op) }

func (op *projectAdjoint) String() string { return "∂" + op.fwd.String() }
