package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// projectFixture is an odd-sized volume (axis-aligned or oblique) with
// random values, and two views of it.
func projectFixture(rng *rand.Rand, n [3]int64, oblique bool, rows, cols int) (*volume.Volume, []float64) {
	vol := blobVolume(rng, n, oblique)
	for i := range vol.V {
		vol.V[i] = rng.Float32() + 0.1
	}
	return vol, biplaneViews(vol.Centre(), rows, cols, 2.3)
}

func mustProject(t testing.TB, vol *volume.Volume, views []float64, rows, cols int, step float64) *Project {
	t.Helper()
	op, err := NewProject(vol, views, rows, cols, step)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// render64 is Project's images of x.
func render64(t testing.TB, op *Project, x []float64) []float64 {
	t.Helper()
	if err := op.Render(x); err != nil {
		t.Fatal(err)
	}
	return op.Output().Data().([]float64)
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Project of a volume's values against RigidDRR at the identity (the same
// kernels along rays mapped another way: to 1e-12) and against DRR (its
// float32 kernels: to 1e-5), both methods, axis-aligned and oblique.
func TestProjectAgainstRigidDRRAndDRR(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, oblique := range []bool{false, true} {
		for _, step := range []float64{0, 0.6} {
			name := fmt.Sprintf("oblique=%v/step=%g", oblique, step)
			const rows, cols = 11, 9
			vol, views := projectFixture(rng, [3]int64{17, 13, 15}, oblique, rows, cols)
			got := render64(t, mustProject(t, vol, views, rows, cols, step), opstest.Widen(vol.V))
			rd, err := NewRigidDRR(vol, views, rows, cols, step, vol.Centre())
			if err != nil {
				t.Fatal(err)
			}
			want, err := rd.Do(tensor.New(tensor.WithShape(6), tensor.WithBacking(make([]float64, 6))))
			if err != nil {
				t.Fatal(err)
			}
			if e := opstest.RelErr(got, want.(*tensor.Dense).Data().([]float64)); !(e <= 1e-12) {
				t.Errorf("%s: against RigidDRR: relative error %.3g", name, e)
			}
			nv := len(views) / PoseWidth
			d, err := NewDRR(vol, rows, cols, step, nv).Do(tensor.New(tensor.WithShape(nv, PoseWidth), tensor.WithBacking(views)))
			if err != nil {
				t.Fatal(err)
			}
			if e := opstest.RelErr(got, opstest.Widen(d.(*tensor.Dense).Data().([]float32))); !(e <= 1e-5) {
				t.Errorf("%s: against DRR: relative error %.3g", name, e)
			}
		}
	}
}

// <Project x, y> = <x, Adjoint y> for random float32-representable x and
// random y, both methods, axis-aligned and oblique volumes; and the
// adjoint is the same with one thread as with all.
func TestProjectAdjointIdentity(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, oblique := range []bool{false, true} {
		for _, step := range []float64{0, 0.45} {
			name := fmt.Sprintf("oblique=%v/step=%g", oblique, step)
			const rows, cols = 13, 11
			vol, views := projectFixture(rng, [3]int64{15, 19, 11}, oblique, rows, cols)
			op := mustProject(t, vol, views, rows, cols, step)
			x := opstest.Widen(opstest.Normals32(rng, len(vol.V)))
			y := opstest.Normals64(rng, len(views)/PoseWidth*rows*cols)
			px := render64(t, op, x)
			ay := make([]float64, len(x))
			if err := op.Adjoint(ay, y); err != nil {
				t.Fatal(err)
			}
			a, b := dot(px, y), dot(x, ay)
			if !(math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))) || a == 0 {
				t.Errorf("%s: <Px, y> = %.17g, <x, A y> = %.17g", name, a, b)
			}
			prev := runtime.GOMAXPROCS(1)
			one := make([]float64, len(x))
			err := op.Adjoint(one, y)
			runtime.GOMAXPROCS(prev)
			if err != nil {
				t.Fatal(err)
			}
			for i := range one {
				if one[i] != ay[i] {
					t.Fatalf("%s: voxel %d: %v with one thread, %v with %d", name, i, one[i], ay[i], prev)
				}
			}
		}
	}
}

// G.Grad of Σ u ⊙ Project(x) through a TapeMachine is Adjoint(u), run
// after run with new values copied into the bound tensor, in the same
// buffer, with no allocation per run that grows with the volume.
func TestProjectGradThroughTapeMachine(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, step := range []float64{0, 0.7} {
		const rows, cols = 7, 9
		vol, views := projectFixture(rng, [3]int64{41, 37, 33}, true, rows, cols)
		op := mustProject(t, vol, views, rows, cols, step)
		n := vol.N
		g := G.NewGraph()
		xt := tensor.New(tensor.WithShape(int(n[0]), int(n[1]), int(n[2])), tensor.WithBacking(make([]float64, len(vol.V))))
		x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(int(n[0]), int(n[1]), int(n[2])), G.WithName("x"), G.WithValue(xt))
		img, err := G.ApplyOp(op, x)
		if err != nil {
			t.Fatal(err)
		}
		nv := op.NumViews()
		u := opstest.Normals64(rng, nv*rows*cols)
		ut := G.NewConstant(tensor.New(tensor.WithShape(nv, rows, cols), tensor.WithBacking(u)), G.WithName("u"))
		cost := G.Must(G.Sum(G.Must(G.HadamardProd(img, ut))))
		grads, err := G.Grad(cost, x)
		if err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g)
		direct := mustProject(t, vol, views, rows, cols, step)
		want := make([]float64, len(vol.V))
		if err := direct.Adjoint(want, u); err != nil {
			t.Fatal(err)
		}
		var buf []float64
		var ms0, ms1 runtime.MemStats
		var inputs [5][]float64
		for run := range inputs {
			inputs[run] = opstest.Widen(opstest.Normals32(rng, len(vol.V)))
		}
		for run := range 5 {
			if run == 2 {
				runtime.ReadMemStats(&ms0)
			}
			copy(xt.Data().([]float64), inputs[run])
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			got := grads[0].Value().Data().([]float64)
			if buf != nil && &got[0] != &buf[0] {
				t.Errorf("step %g, run %d: the gradient came in another buffer", step, run)
			}
			buf = got
			if e := opstest.RelErr(got, want); !(e <= 1e-12) {
				t.Fatalf("step %g, run %d: G.Grad against Adjoint(u): relative error %.3g", step, run, e)
			}
			if c, w := cost.Value().Data().(float64), dot(render64(t, direct, xt.Data().([]float64)), u); !(math.Abs(c-w) <= 1e-12*math.Abs(w)) {
				t.Fatalf("step %g, run %d: cost %v, want %v", step, run, c, w)
			}
			m.Reset()
		}
		runtime.ReadMemStats(&ms1)
		m.Close()
		per := float64(ms1.TotalAlloc-ms0.TotalAlloc) / 3
		if vb := 8 * float64(len(vol.V)); per > vb/8 {
			t.Errorf("step %g: %.0f bytes allocated per run, against %.0f for the volume", step, per, vb)
		}
		t.Logf("step %g: %.0f bytes allocated per run (volume %d bytes)", step, per, 8*len(vol.V))
	}
}

// A few steps of steepest descent with exact line search on
// ½‖Project(x) − b‖², the gradient from G.Grad, reduce the residual.
func TestProjectGradientDescent(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, step := range []float64{0, 0.5} {
		const rows, cols = 15, 13
		vol, views := projectFixture(rng, [3]int64{9, 11, 7}, true, rows, cols)
		op := mustProject(t, vol, views, rows, cols, step)
		line := mustProject(t, vol, views, rows, cols, step)
		nv, n := op.NumViews(), vol.N
		b := render64(t, line, opstest.Widen(vol.V))
		b = append([]float64(nil), b...)
		g := G.NewGraph()
		xt := tensor.New(tensor.WithShape(int(n[0]), int(n[1]), int(n[2])), tensor.WithBacking(make([]float64, len(vol.V))))
		x := G.NewTensor(g, tensor.Float64, 3, G.WithShape(int(n[0]), int(n[1]), int(n[2])), G.WithName("x"), G.WithValue(xt))
		img := G.Must(G.ApplyOp(op, x))
		bt := G.NewConstant(tensor.New(tensor.WithShape(nv, rows, cols), tensor.WithBacking(b)), G.WithName("b"))
		cost := G.Must(G.Mul(G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sub(img, bt)))))), G.NewConstant(0.5)))
		grads, err := G.Grad(cost, x)
		if err != nil {
			t.Fatal(err)
		}
		m := G.NewTapeMachine(g)
		var costs []float64
		for range 6 {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			costs = append(costs, cost.Value().Data().(float64))
			gr := append([]float64(nil), grads[0].Value().Data().([]float64)...)
			pg := render64(t, line, gr)
			alpha := dot(gr, gr) / dot(pg, pg)
			xs := xt.Data().([]float64)
			for i := range xs {
				xs[i] -= alpha * gr[i]
			}
			m.Reset()
		}
		m.Close()
		for i := 1; i < len(costs); i++ {
			if !(costs[i] < costs[i-1]) {
				t.Errorf("step %g: the cost rose at step %d: %v", step, i, costs)
			}
		}
		if !(costs[len(costs)-1] < 0.1*costs[0]) {
			t.Errorf("step %g: the cost fell only from %v to %v", step, costs[0], costs[len(costs)-1])
		}
		t.Logf("step %g: costs %.4g", step, costs)
	}
}
