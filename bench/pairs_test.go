package bench

// Naive/planned pairs: each workload's batch computed the way the seeds
// did it, expressed in Gorgonia at a size that fits (every intermediate
// materialised, one graph node per elementwise step, a fresh graph and
// TapeMachine per iteration), against tapeloop's Program, compiled once and
// replayed over its preallocated buffers. Compare with
//
//	cd bench && go test -run '^$' -bench 'Naive|Planned' -count 5 | benchstat -col /kind -
//
// Each reports ns/op, B/op, allocs/op and the workload's rate; before
// timing, each checks that both sides compute the same thing.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// runFresh builds a graph with build, runs it once on a new TapeMachine
// and returns a copy of the output: the per-iteration life of an eager
// framework's intermediates.
func runFresh(b *testing.B, build func(g *G.ExprGraph) *G.Node) []float32 {
	g := G.NewGraph()
	out := build(g)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		b.Fatal(err)
	}
	return append([]float32(nil), out.Value().Data().([]float32)...)
}

func input(g *G.ExprGraph, name string, data []float32, shape ...int) *G.Node {
	return G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))))
}

func must(n *G.Node, err error) *G.Node {
	if err != nil {
		panic(err)
	}
	return n
}

// lerp is a + t⊙(b − a), three nodes.
func lerp(a, b, t *G.Node) *G.Node {
	return must(G.Add(a, must(G.HadamardProd(t, must(G.Sub(b, a))))))
}

// agree fails unless got matches want to rel relative to want's largest
// element.
func agree(b *testing.B, what string, got, want []float32, rel float64) {
	if len(got) != len(want) {
		b.Fatalf("%s: %d results, want %d", what, len(got), len(want))
	}
	var d, m float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i]-want[i])))
		m = max(m, math.Abs(float64(want[i])))
	}
	if !(d <= rel*m) {
		b.Fatalf("%s: naive and planned differ by %.3g (largest result %.3g)", what, d, m)
	}
}

// pairKind runs naive or planned iterations, each of units items.
func pairKind(b *testing.B, naive, planned func() []float32, units float64, unit string) {
	if flatCost(b, naive, planned) {
		return
	}
	b.Run("kind=naive", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			naive()
		}
		b.ReportMetric(units*float64(b.N)/b.Elapsed().Seconds(), unit)
	})
	b.Run("kind=planned", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			planned()
		}
		b.ReportMetric(units*float64(b.N)/b.Elapsed().Seconds(), unit)
	})
}

// givenQueries only counts: the benchmark copies its queries into the
// program's input itself, so that both sides read the same ones.
type givenQueries int

func (q givenQueries) Len() int                          { return int(q) }
func (q givenQueries) Read32(dst []float32, _ int) error { return nil }
func (q givenQueries) Read64(dst []float64, _ int) error { return nil }

// Interpolation: M interpolants at a batch of queries, Σ of
// squares per query. Naive: the nested vmap's (M, batch) arrays — the four
// neighbours of every interpolant at every query and the offset t —
// gathered fresh, the cubic weights and the sum as elementwise nodes.
func BenchmarkPairInterp(b *testing.B) {
	const m, gsz, batch = 300, 4096, 4096
	rng := rand.New(rand.NewPCG(21, 22))
	f := make([]float64, m*gsz)
	for i := range f {
		f[i] = rng.NormFloat64()
	}
	dx := 1.0 / (gsz - 1)
	tab, err := ops.NewInterpTable(f, m, gsz, 0, dx, ops.ReduceSumSq, ops.MethodAuto, tensor.Float32)
	if err != nil {
		b.Fatal(err)
	}
	// Both sides evaluate the same queries x: the planned side's input is
	// filled from x before each run. (A generated source, such as
	// UniformQueries, would have the op make its own queries.)
	job, err := interp.New(interp.Setup{Table: tab, Reduce: ops.ReduceSumSq, Dtype: tensor.Float32,
		Queries: givenQueries(batch)})
	if err != nil {
		b.Fatal(err)
	}
	prog, err := engine.Compile(job, batch)
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	x := make([]float32, batch)
	for i := range x {
		x[i] = float32(rng.Float64()*1.1 - 0.05)
	}
	planned := func() []float32 {
		copy(prog.Inputs()[0].Data().([]float32), x)
		if _, err := prog.Run(); err != nil {
			b.Fatal(err)
		}
		return prog.Outputs()[0].Data().([]float32)
	}
	// The cubic's weights as polynomials in t (the interp peer's A, B, C, D).
	coef := [4][4]float32{
		{-1. / 16, 9. / 16, 9. / 16, -1. / 16}, {1. / 24, -9. / 8, 9. / 8, -1. / 24},
		{1. / 4, -1. / 4, -1. / 4, 1. / 4}, {-1. / 6, 1. / 2, -1. / 2, 1. / 6},
	}
	naive := func() []float32 {
		var c [4][]float32
		for k := range c {
			c[k] = make([]float32, m*batch)
		}
		t := make([]float32, m*batch)
		ub := float64(gsz+1) * dx
		for q, xv := range x {
			xc := min(max(float64(xv), 0), ub)
			ix := math.Floor(xc / dx)
			tq := float32(xc/dx - (ix + 0.5))
			start := min(max(int(ix), 0), gsz-2)
			for j := range m {
				for k := range 4 { // f padded by a zero column on each side
					col := start + k - 1
					if col >= 0 && col < gsz {
						c[k][j*batch+q] = float32(f[j*gsz+col])
					}
				}
				t[j*batch+q] = tq
			}
		}
		return runFresh(b, func(g *G.ExprGraph) *G.Node {
			tn := input(g, "t", t, m, batch)
			var val *G.Node
			for k := range 4 {
				w := G.NewConstant(coef[3][k])
				for p := 2; p >= 0; p-- { // Horner: w = coef[p][k] + t⊙w
					w = must(G.Add(G.NewConstant(coef[p][k]), must(G.HadamardProd(tn, w))))
				}
				term := must(G.HadamardProd(w, input(g, fmt.Sprintf("c%d", k), c[k], m, batch)))
				if val == nil {
					val = term
				} else {
					val = must(G.Add(val, term))
				}
			}
			return must(G.Sum(must(G.Square(val)), 0))
		})
	}
	// Both sides sum 300 float32 squares per query in different orders;
	// their rounding differs by a few units in the last place of the sum
	// (about 1e-6 of it here), far below what different queries give.
	agree(b, "interp", naive(), planned(), 1e-5)
	pairKind(b, naive, planned, m*batch, "evals/s")
}

// Affinity: a block of rows against all N images, −L1. Naive:
// the (block·N, D) difference materialised from both sides tiled out, then
// Abs and Sum nodes.
func BenchmarkPairAffinity(b *testing.B) {
	const n, d, block = 256, 1024, 32
	rng := rand.New(rand.NewPCG(23, 24))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	data, err := pairwise.NewPairData(x, n, d, pairwise.MetricL1)
	if err != nil {
		b.Fatal(err)
	}
	job, err := affinity.New(affinity.Setup{Data: data, Metric: pairwise.MetricL1})
	if err != nil {
		b.Fatal(err)
	}
	prog, err := engine.Compile(job, block)
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	off := 0
	planned := func() []float32 {
		if err := job.Feed(prog.Inputs(), off, block); err != nil {
			b.Fatal(err)
		}
		if _, err := prog.Run(); err != nil {
			b.Fatal(err)
		}
		return prog.Outputs()[0].Data().([]float32)
	}
	naive := func() []float32 {
		a := make([]float32, block*n*d)
		c := make([]float32, block*n*d)
		for r := range block {
			for j := range n {
				copy(a[(r*n+j)*d:], x[(off+r)*d:(off+r+1)*d])
				copy(c[(r*n+j)*d:], x[j*d:(j+1)*d])
			}
		}
		return runFresh(b, func(g *G.ExprGraph) *G.Node {
			diff := must(G.Sub(input(g, "rows", a, block*n, d), input(g, "all", c, block*n, d)))
			return must(G.Neg(must(G.Sum(must(G.Abs(diff)), 1))))
		})
	}
	agree(b, "affinity", naive(), planned(), 1e-5)
	pairKind(b, naive, planned, block*n*d, "pair-dims/s")
}

// DRR: one pose, trilinear samples every 0.5 mm. Naive: the
// eight neighbours and three fractions of every sample of every ray
// gathered into fresh arrays, the interpolation as lerp nodes, the sum
// along each ray as a Sum node.
func BenchmarkPairDRR(b *testing.B) {
	const nv, det, step = 64, 64, 0.5
	rng := rand.New(rand.NewPCG(25, 26))
	// Origin is the centre of voxel 0: the box is centred on the isocentre.
	vol := &volume.Volume{N: [3]int64{nv, nv, nv}, Origin: [3]float64{-(nv - 1) / 2., -(nv - 1) / 2., -(nv - 1) / 2.},
		Spacing: [3]float64{1, 1, 1}, V: make([]float32, nv*nv*nv)}
	for i := range vol.V {
		vol.V[i] = rng.Float32()
	}
	poses, err := ops.Orbit(7, [3]float64{}, 1020, 510, det, det, 2)
	if err != nil {
		b.Fatal(err)
	}
	pose := poses[1] // an oblique one
	job, err := drr.New(drr.Setup{Vol: vol, Poses: []ops.Pose{pose}, Step: step})
	if err != nil {
		b.Fatal(err)
	}
	prog, err := engine.Compile(job, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	planned := func() []float32 {
		if err := job.Feed(prog.Inputs(), 0, 1); err != nil {
			b.Fatal(err)
		}
		if _, err := prog.Run(); err != nil {
			b.Fatal(err)
		}
		return prog.Outputs()[0].Data().([]float32)
	}
	// Samples at the fractions (q + 1/2)·da of every ray, da = step/L with
	// L the longest ray's length (to a detector corner), for q over the
	// range that can reach the volume (its circumscribed sphere about the
	// isocentre, where the volume is centred; rays are 1020 mm to L long),
	// zero outside, each weighing da times its ray's length: as tapeloop.
	radius := math.Sqrt(3) * nv / 2
	half := float64(det-1) / 2 * 2
	lref := math.Sqrt(1020*1020 + 2*half*half)
	da := step / lref
	q0 := int(math.Floor((510-radius)/lref/da)) - 1
	nq := int(math.Ceil((510+radius)/1020/da)) - q0 + 3
	rays := det * det
	var u, v [3]float64
	for a := range 3 {
		u[a], v[a] = pose.U[a]*pose.Pixel[0], pose.V[a]*pose.Pixel[1]
	}
	naive := func() []float32 {
		var c [8][]float32
		for k := range c {
			c[k] = make([]float32, rays*nq)
		}
		var fr [3][]float32
		for a := range fr {
			fr[a] = make([]float32, rays*nq)
		}
		w := make([]float32, rays)
		for r := range det {
			for col := range det {
				var dir [3]float64
				for a := range 3 {
					p := pose.Center[a] + (float64(col)-float64(det-1)/2)*u[a] + (float64(r)-float64(det-1)/2)*v[a]
					dir[a] = p - pose.Source[a]
				}
				ray := r*det + col
				w[ray] = float32(da * math.Sqrt(dir[0]*dir[0]+dir[1]*dir[1]+dir[2]*dir[2]))
				for s := range nq {
					frac := (float64(q0+s) + 0.5) * da
					var idx [3]int
					for a := range 3 {
						ci := (pose.Source[a] + frac*dir[a] - vol.Origin[a]) / vol.Spacing[a]
						fl := math.Floor(ci)
						idx[a] = int(fl)
						fr[a][ray*nq+s] = float32(ci - fl)
					}
					for k := range 8 {
						i, j, kk := idx[0]+k>>2, idx[1]+k>>1&1, idx[2]+k&1
						if i >= 0 && j >= 0 && kk >= 0 && i < nv && j < nv && kk < nv {
							c[k][ray*nq+s] = vol.V[(i*nv+j)*nv+kk]
						}
					}
				}
			}
		}
		return runFresh(b, func(g *G.ExprGraph) *G.Node {
			in := func(name string, d []float32) *G.Node { return input(g, name, d, rays, nq) }
			tx, ty, tz := in("tx", fr[0]), in("ty", fr[1]), in("tz", fr[2])
			var cn [8]*G.Node
			for k := range cn {
				cn[k] = in(fmt.Sprintf("c%d", k), c[k])
			}
			c00, c01 := lerp(cn[0], cn[1], tz), lerp(cn[2], cn[3], tz)
			c10, c11 := lerp(cn[4], cn[5], tz), lerp(cn[6], cn[7], tz)
			val := lerp(lerp(c00, c01, ty), lerp(c10, c11, ty), tx)
			return must(G.HadamardProd(must(G.Sum(val, 1)), input(g, "w", w, rays)))
		})
	}
	agree(b, "drr", naive(), planned(), 1e-4)
	pairKind(b, naive, planned, 1, "DRR/s")
}

// Wavelet: one combination. Naive: a fresh graph, op and
// buffers per combination, so the volume is transformed again every time
// (what a loop that keeps nothing between iterations does); planned: the
// volume transformed once, buffers reused.
func BenchmarkPairWavelet(b *testing.B) {
	const nv = 48
	rng := rand.New(rand.NewPCG(27, 28))
	v := make([]float32, nv*nv*nv)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	combos := randomCombos(8, []float64{1, 2})
	src, err := ops.NewWaveletSource(v, [3]int{nv, nv, nv}, 1, ops.Wrap, [3]int{})
	if err != nil {
		b.Fatal(err)
	}
	job, err := wavelet.New(wavelet.Setup{Src: src, Combos: combos})
	if err != nil {
		b.Fatal(err)
	}
	prog, err := engine.Compile(job, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	k := 0
	res := make([]float32, 4)
	planned := func() []float32 {
		if err := job.Feed(prog.Inputs(), k%len(combos), 1); err != nil {
			b.Fatal(err)
		}
		if _, err := prog.Run(); err != nil {
			b.Fatal(err)
		}
		for i, v := range prog.Outputs()[0].Data().([]float64) {
			res[i] = float32(v)
		}
		return res
	}
	naive := func() []float32 {
		s, err := ops.NewWaveletSource(v, [3]int{nv, nv, nv}, 1, ops.Wrap, [3]int{})
		if err != nil {
			b.Fatal(err)
		}
		params := tensor.New(tensor.WithShape(1, ops.WaveletParams), tensor.Of(tensor.Float64))
		if err := job.Feed([]*tensor.Dense{params}, k%len(combos), 1); err != nil {
			b.Fatal(err)
		}
		g := G.NewGraph()
		p := G.NewMatrix(g, tensor.Float64, G.WithShape(1, ops.WaveletParams), G.WithName("params"), G.WithValue(params))
		sums := must(G.ApplyOp(ops.NewWaveletResponse(s, 1), p))
		out := must(G.ApplyOp(ops.NewWaveletMoments(s.N, 1), sums))
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		y := make([]float32, 4)
		for i, v := range out.Value().Data().([]float64) {
			y[i] = float32(v)
		}
		return y
	}
	agree(b, "wavelet", naive(), planned(), 1e-6)
	pairKind(b, naive, planned, 1, "combinations/s")
}
