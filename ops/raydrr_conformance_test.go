package ops

// Conformance of the differentiable DRR ops, RigidDRR and Project, on
// every backend (see conformance_test.go): each against references built
// here ray by ray in float64 (cpukern.DRRGrad on one ray at a time through
// the unpadded volume, whatever the method, with the rays moved by the
// transform as its definition reads), the transform's derivatives by
// Richardson-extrapolated central differences of the rays' ends, and
// Project's adjoint as Σ_ray y·Project(e_voxel), its forward map applied to
// every unit volume. Tolerances 1e-9 relative, norm-wise: every path is
// float64.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// ---- RigidDRR ----

type rigidCase struct {
	name       string
	vol        *volume.Volume
	views      []float64
	rows, cols int
	step       float64
	center     [3]float64
	p          [2][6]float64 // two parameter sets: a graph runs both
	u          []float64     // an upstream gradient of the images
	img, jac   [2][]float64  // per parameter set: the images, ∂image/∂p (6 per pixel)
}

// refRigidEnds are the ends of ray (view b, pixel r, c) moved by T⁻¹ for
// parameters p, y ↦ Rᵀ(y − center − t) + center, in the volume's own frame.
func refRigidEnds(c *rigidCase, p [6]float64, b, r, col int) (s, d [3]float64) {
	rot := rigid.Rotation([3]float64(p[0:3]))
	inv := func(y [3]float64) [3]float64 {
		var x [3]float64
		for i := range 3 {
			x[i] = c.center[i]
			for k := range 3 {
				x[i] += rot[k][i] * (y[k] - c.center[k] - p[3+k])
			}
		}
		return c.vol.ToLocal(x)
	}
	pose := c.views[b*PoseWidth:][:PoseWidth]
	var w [3]float64
	for a := range 3 {
		w[a] = pose[3+a] + float64(col)*pose[6+a] + float64(r)*pose[9+a]
	}
	return inv([3]float64(pose[0:3])), inv(w)
}

// refRigid is the images and the Jacobian for parameters p, ray by ray.
func refRigid(c *rigidCase, p [6]float64) (img, jac []float64) {
	lv := c.vol.Local()
	nv := len(c.views) / PoseWidth
	img, jac = make([]float64, nv*c.rows*c.cols), make([]float64, 6*nv*c.rows*c.cols)
	for b := range nv {
		lref := LongestRay(c.views[b*PoseWidth:], c.rows, c.cols)
		for r := range c.rows {
			for col := range c.cols {
				k := (b*c.rows+r)*c.cols + col
				s, d := refRigidEnds(c, p, b, r, col)
				var gs, gd [3]float64
				cpukern.DRRGrad(kernelGrid(lv), s[:], d[:], img[k:k+1], gs[:], gd[:], c.step, lref)
				for j := range 6 {
					// Richardson: (4·D(h/2) − D(h))/3, D the central difference.
					cd := func(h float64) (ds, dd [3]float64) {
						pp, pm := p, p
						pp[j] += h
						pm[j] -= h
						s1, d1 := refRigidEnds(c, pp, b, r, col)
						s0, d0 := refRigidEnds(c, pm, b, r, col)
						for a := range 3 {
							ds[a], dd[a] = (s1[a]-s0[a])/(2*h), (d1[a]-d0[a])/(2*h)
						}
						return
					}
					const h = 1e-3
					s1, d1 := cd(h)
					s2, d2 := cd(h / 2)
					for a := range 3 {
						jac[6*k+j] += gs[a]*(4*s2[a]-s1[a])/3 + gd[a]*(4*d2[a]-d1[a])/3
					}
				}
			}
		}
	}
	return img, jac
}

// rigidConformanceCases: axis-aligned and oblique volumes of odd sizes,
// anisotropic spacing, both methods, two views (one detector tilted) of
// odd sizes, the centre of rotation off the volume's, random parameters.
// The trilinear references' Jacobians are checked against central
// differences of their images (the kernels' derivative formulas).
func rigidConformanceCases(t *testing.T) []rigidCase {
	rng := rand.New(rand.NewPCG(91, 92))
	var cases []rigidCase
	for _, oblique := range []bool{false, true} {
		for _, step := range []float64{0, 0.7} {
			vol := blobVolume(rng, [3]int64{13, 15, 11}, oblique)
			ctr := vol.Centre()
			const rows, cols = 7, 9
			c := rigidCase{name: fmt.Sprintf("oblique=%v/step=%g", oblique, step), vol: vol, views: biplaneViews(ctr, rows, cols, 2.3),
				rows: rows, cols: cols, step: step, center: [3]float64{ctr[0] + 2, ctr[1] - 3, ctr[2] + 1}}
			c.p = [2][6]float64{randParams(rng), randParams(rng)}
			c.u = opstest.Normals64(rng, 2*rows*cols)
			hits := 0
			for i, p := range c.p {
				c.img[i], c.jac[i] = refRigid(&c, p)
				for _, x := range c.img[i] {
					if x != 0 {
						hits++
					}
				}
			}
			if hits < len(c.u) {
				t.Fatalf("%s: only %d of %d rays hit the volume: the test geometry is off", c.name, hits, 2*len(c.u))
			}
			if step > 0 {
				for j := range 6 {
					h := 1e-6
					pp, pm := c.p[0], c.p[0]
					pp[j] += h
					pm[j] -= h
					ip, _ := refRigid(&c, pp)
					im, _ := refRigid(&c, pm)
					fd, col := make([]float64, len(ip)), make([]float64, len(ip))
					for k := range fd {
						fd[k], col[k] = (ip[k]-im[k])/(2*h), c.jac[0][6*k+j]
					}
					// ~1e-8 where no sample crosses a voxel plane between
					// p ± h, ~3e-4 where one does (the trilinear field's kink).
					if e := opstest.RelErr(col, fd); !(e <= 1e-3) {
						t.Fatalf("%s: the reference's ∂image/∂p%d against central differences: relative error %.3g", c.name, j, e)
					}
				}
			}
			cases = append(cases, c)
		}
	}
	return cases
}

func TestConformanceRigidDRR(t *testing.T) {
	cases := rigidConformanceCases(t)
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) { runRigidConformance(t, b, cases) })
}

// runRigidConformance: the images (run twice, the output marked between),
// the Jacobian, and the gradient of Σ u ⊙ images through SymDiff and
// G.Grad on a TapeMachine, run for both parameter sets (the derivatives
// of the second not those of the first).
func runRigidConformance(t *testing.T, b backend, cases []rigidCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mk := func() *RigidDRR {
				op, err := NewRigidDRR(c.vol, c.views, c.rows, c.cols, c.step, c.center)
				if err != nil {
					t.Fatal(err)
				}
				o, ok := b.Place(t, op).(*RigidDRR)
				if !ok {
					t.Fatalf("%s: the twin is not a *RigidDRR", b.Name)
				}
				return o
			}
			op := mk()
			pt := tensor.New(tensor.WithShape(6), tensor.WithBacking(append([]float64(nil), c.p[0][:]...)))
			opstest.RunTwice(t, b, op, math.NaN(), func(run string, out *tensor.Dense) {
				if e := opstest.RelErr(out.Data().([]float64), c.img[0]); !(e <= 1e-9) {
					t.Errorf("%s: images: relative error %.3g", run, e)
				}
			}, pt)
			for i, p := range c.p {
				jac, img, err := op.Jacobian(p)
				if err != nil {
					t.Fatal(err)
				}
				if e := opstest.RelErr(img, c.img[i]); !(e <= 1e-9) {
					t.Errorf("parameters %d: Jacobian's images: relative error %.3g", i, e)
				}
				if e := opstest.RelErr(jac, c.jac[i]); !(e <= 1e-9) {
					t.Errorf("parameters %d: Jacobian: relative error %.3g", i, e)
				}
			}
			// The gradient through the graph, on a fresh op.
			g := G.NewGraph()
			pv := tensor.New(tensor.WithShape(6), tensor.WithBacking(make([]float64, 6)))
			theta := G.NewVector(g, tensor.Float64, G.WithShape(6), G.WithName("theta"), G.WithValue(pv))
			img, err := G.ApplyOp(mk(), theta)
			if err != nil {
				t.Fatal(err)
			}
			nv := len(c.views) / PoseWidth
			ut := G.NewConstant(tensor.New(tensor.WithShape(nv, c.rows, c.cols), tensor.WithBacking(c.u)), G.WithName("u"))
			grads, err := G.Grad(G.Must(G.Sum(G.Must(G.HadamardProd(img, ut)))), theta)
			if err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g)
			defer m.Close()
			for i, p := range c.p {
				copy(pv.Data().([]float64), p[:])
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				want := make([]float64, 6)
				for k, u := range c.u {
					for j := range 6 {
						want[j] += u * c.jac[i][6*k+j]
					}
				}
				got := grads[0].Value().Data().([]float64)
				if e := opstest.RelErr(got, want); !(e <= 1e-9) {
					t.Errorf("parameters %d: G.Grad %v, want %v (relative error %.3g)", i, got, want, e)
				}
				m.Reset()
			}
		})
	}
}

// ---- Project ----

type projectCase struct {
	name       string
	vol        *volume.Volume
	views      []float64
	rows, cols int
	step       float64
	x, y       []float64 // values (float32s), an images' gradient
	img, adj   []float64 // Project(x), Adjoint(y)
	x2, img2   []float64 // other values, their images: the op's next run
}

// refProject is the images of the values x ray by ray through the
// unpadded volume in its own frame.
func refProject(c *projectCase, x []float64) []float64 {
	lv := c.vol.Local()
	lv.V = opstest.Narrow(x)
	nv := len(c.views) / PoseWidth
	img := make([]float64, nv*c.rows*c.cols)
	for b := range nv {
		pose := c.views[b*PoseWidth:][:PoseWidth]
		lref := LongestRay(pose, c.rows, c.cols)
		s := c.vol.ToLocal([3]float64(pose[0:3]))
		for r := range c.rows {
			for col := range c.cols {
				var w [3]float64
				for a := range 3 {
					w[a] = pose[3+a] + float64(col)*pose[6+a] + float64(r)*pose[9+a]
				}
				d := c.vol.ToLocal(w)
				k := (b*c.rows+r)*c.cols + col
				cpukern.DRRGrad(kernelGrid(lv), s[:], d[:], img[k:k+1], nil, nil, c.step, lref)
			}
		}
	}
	return img
}

// projectConformanceCases: axis-aligned and oblique volumes of odd sizes,
// both methods, two views; values random float32s, the images' gradient
// random; the adjoint voxel by voxel, Σ_ray y·(Project e_voxel)[ray].
func projectConformanceCases(t *testing.T) []projectCase {
	rng := rand.New(rand.NewPCG(93, 94))
	var cases []projectCase
	for _, oblique := range []bool{false, true} {
		for _, step := range []float64{0, 0.45} {
			const rows, cols = 7, 5
			vol, views := projectFixture(rng, [3]int64{9, 11, 7}, oblique, rows, cols)
			c := projectCase{name: fmt.Sprintf("oblique=%v/step=%g", oblique, step), vol: vol, views: views, rows: rows, cols: cols, step: step}
			c.x = opstest.Widen(opstest.Normals32(rng, len(vol.V)))
			c.y = opstest.Normals64(rng, 2*rows*cols)
			c.img = refProject(&c, c.x)
			c.x2 = opstest.Widen(opstest.Normals32(rng, len(vol.V)))
			c.img2 = refProject(&c, c.x2)
			c.adj = make([]float64, len(c.x))
			e := make([]float64, len(c.x))
			touched := 0
			for j := range e {
				e[j] = 1
				c.adj[j] = dot(c.y, refProject(&c, e))
				e[j] = 0
				if c.adj[j] != 0 {
					touched++
				}
			}
			if touched < len(e)/3 {
				t.Fatalf("%s: the rays cross only %d of %d voxels: the test geometry is off", c.name, touched, len(e))
			}
			cases = append(cases, c)
		}
	}
	return cases
}

func TestConformanceProject(t *testing.T) {
	cases := projectConformanceCases(t)
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) { runProjectConformance(t, b, cases) })
}

// runProjectConformance: the images and the adjoint (its op, as SymDiff
// builds it), each run twice with the output marked between; and the
// gradient of Σ y ⊙ Project(x) through G.Grad on a TapeMachine.
func runProjectConformance(t *testing.T, b backend, cases []projectCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.vol.N
			shape := []int{int(n[0]), int(n[1]), int(n[2])}
			mk := func() *Project {
				o, ok := b.Place(t, mustProject(t, c.vol, c.views, c.rows, c.cols, c.step)).(*Project)
				if !ok {
					t.Fatalf("%s: the twin is not a *Project", b.Name)
				}
				return o
			}
			op := mk()
			xt := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]float64(nil), c.x...)))
			opstest.RunTwice(t, b, op, math.NaN(), func(run string, out *tensor.Dense) {
				if e := opstest.RelErr(out.Data().([]float64), c.img); !(e <= 1e-9) {
					t.Errorf("%s: images: relative error %.3g", run, e)
				}
			}, xt)
			v, err := op.Do(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(c.x2)))
			if err != nil {
				t.Fatal(err)
			}
			if e := opstest.RelErr(v.(*tensor.Dense).Data().([]float64), c.img2); !(e <= 1e-9) {
				t.Errorf("other values: images: relative error %.3g", e)
			}
			nv := len(c.views) / PoseWidth
			yt := tensor.New(tensor.WithShape(nv, c.rows, c.cols), tensor.WithBacking(c.y))
			opstest.RunTwice(t, b, &projectAdjoint{fwd: op}, math.NaN(), func(run string, out *tensor.Dense) {
				if e := opstest.RelErr(out.Data().([]float64), c.adj); !(e <= 1e-9) {
					t.Errorf("%s: adjoint: relative error %.3g", run, e)
				}
			}, yt)
			g := G.NewGraph()
			x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(shape...), G.WithName("x"), G.WithValue(xt))
			img, err := G.ApplyOp(mk(), x)
			if err != nil {
				t.Fatal(err)
			}
			ut := G.NewConstant(yt, G.WithName("y"))
			grads, err := G.Grad(G.Must(G.Sum(G.Must(G.HadamardProd(img, ut)))), x)
			if err != nil {
				t.Fatal(err)
			}
			m := G.NewTapeMachine(g)
			defer m.Close()
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			if e := opstest.RelErr(grads[0].Value().Data().([]float64), c.adj); !(e <= 1e-9) {
				t.Errorf("G.Grad: relative error %.3g", e)
			}
		})
	}
}
