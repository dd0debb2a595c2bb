package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// refInterp is the original case's semantics written out literally, in float64:
// pad f with one zero at each end, clamp, floor, weights, dynamic_slice
// with a clamped start, dot.
func refInterp(f []float64, m, g int, a, dx, x float64) []float64 {
	lb, ub := a, a+float64(g+1)*dx
	xc := math.Min(math.Max(x, lb), ub) - a
	ix := math.Floor(xc / dx)
	t := xc/dx - (ix + 0.5)
	A := []float64{-1.0 / 16, 9.0 / 16, 9.0 / 16, -1.0 / 16}
	B := []float64{1.0 / 24, -9.0 / 8, 9.0 / 8, -1.0 / 24}
	C := []float64{1.0 / 4, -1.0 / 4, -1.0 / 4, 1.0 / 4}
	D := []float64{-1.0 / 6, 1.0 / 2, -1.0 / 2, 1.0 / 6}
	start := int(ix)
	if start < 0 {
		start = 0
	}
	if start > g+2-4 {
		start = g + 2 - 4
	}
	vals := make([]float64, m)
	for j := 0; j < m; j++ {
		fp := make([]float64, g+2)
		copy(fp[1:], f[j*g:(j+1)*g])
		for k := 0; k < 4; k++ {
			w := A[k] + t*B[k] + t*t*C[k] + t*t*t*D[k]
			vals[j] += fp[start+k] * w
		}
	}
	return vals
}

func refReduce(vals []float64, r Reduce) []float64 {
	switch r {
	case ReduceNone:
		return vals
	case ReduceSum:
		s := 0.0
		for _, v := range vals {
			s += v
		}
		return []float64{s}
	default:
		s := 0.0
		for _, v := range vals {
			s += v * v
		}
		return []float64{s}
	}
}

// testQueries mixes uniform points inside the grid with points below a,
// above ub, exactly on grid nodes and on the bounds.
func testQueries(rng *rand.Rand, n int, a, dx float64, g int) []float64 {
	ub := a + float64(g+1)*dx
	x := make([]float64, n)
	for i := range x {
		switch i % 10 {
		case 0:
			x[i] = a - rng.Float64()*5*dx
		case 1:
			x[i] = ub + rng.Float64()*5*dx
		case 2:
			x[i] = a + float64(rng.IntN(g+2))*dx
		case 3:
			x[i] = []float64{a, ub, a + float64(g-1)*dx}[rng.IntN(3)]
		default:
			x[i] = a + rng.Float64()*(ub-a)
		}
	}
	return x
}

func TestInterpTableRejectsBadInput(t *testing.T) {
	ok := []float64{1, 2, 3, 4}
	cases := []struct {
		name string
		f    []float64
		m, g int
		a    float64
		dx   float64
	}{
		{"M=0", nil, 0, 4, 0, 1},
		{"G<4", []float64{1, 2, 3}, 1, 3, 0, 1},
		{"dx=0", ok, 1, 4, 0, 0},
		{"dx<0", ok, 1, 4, 0, -1},
		{"dx=NaN", ok, 1, 4, 0, math.NaN()},
		{"a=Inf", ok, 1, 4, math.Inf(1), 1},
		{"f NaN", []float64{1, math.NaN(), 3, 4}, 1, 4, 0, 1},
		{"f Inf", []float64{1, 2, 3, math.Inf(-1)}, 1, 4, 0, 1},
		{"size", ok, 2, 4, 0, 1},
	}
	for _, c := range cases {
		if _, err := NewInterpTable(c.f, c.m, c.g, c.a, c.dx, ReduceSumSq, MethodAuto, tensor.Float32); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func benchmarkInterp(b *testing.B, r Reduce, meth Method, m, g, n int) {
	rng := rand.New(rand.NewPCG(3, 4))
	f := opstest.Widen(opstest.Uniform32(rng, m*g))
	tab, err := NewInterpTable(f, m, g, 0, 1.0/float64(g-1), r, meth, tensor.Float32)
	if err != nil {
		b.Fatal(err)
	}
	x := opstest.Uniform32(rng, n)
	op := NewInterp1D(tab, r, meth, tensor.Float32, n)
	in := tensor.New(tensor.WithBacking(x))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := op.Do(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(m)*float64(n)*float64(b.N)/b.Elapsed().Seconds(), "evals/s")
}

// Seed sizes: 300 interpolants, 4096-point grid, batches of 65,536 queries.
func BenchmarkInterp1DSumSqGram(b *testing.B) {
	benchmarkInterp(b, ReduceSumSq, MethodAuto, 300, 4096, 1<<16)
}
func BenchmarkInterp1DSumSqDirect(b *testing.B) {
	benchmarkInterp(b, ReduceSumSq, MethodDirect, 300, 4096, 1<<16)
}
func BenchmarkInterp1DSum(b *testing.B) { benchmarkInterp(b, ReduceSum, MethodAuto, 300, 4096, 1<<16) }
func BenchmarkInterp1DNone(b *testing.B) {
	benchmarkInterp(b, ReduceNone, MethodAuto, 300, 4096, 1<<14)
}

// BenchmarkInterp1DSeed times the seed's size, 10⁶ float32 queries against
// M = 300 interpolants on a 4096-point grid, in one batch: each reduction on
// the cpukern kernels (the op, as the workload runs it) beside the Go loops
// it ran before ("go", split over the cores the same way), one after the
// other so that -count interleaves them. ns/point is per query; GB/s is the
// (N, M) output written by none, beside the rate of clearing it
// ("none/clear"), the most the memory takes.
func BenchmarkInterp1DSeed(b *testing.B) {
	const m, g, n = 300, 4096, 1_000_000
	rng := rand.New(rand.NewPCG(3, 4))
	f := opstest.Widen(opstest.Uniform32(rng, m*g))
	x := opstest.Uniform32(rng, n)
	in := tensor.New(tensor.WithBacking(x))
	var out []float32 // shared by the cases, (N, M) at the largest
	cases := []struct {
		name string
		r    Reduce
		me   Method
		old  func(t *InterpTable, x, out []float32)
	}{
		{"sumsq", ReduceSumSq, MethodAuto, func(t *InterpTable, x, out []float32) {
			parallel.For(len(x), grain, func(lo, hi int) { goGramSumSq(t, x[lo:hi], out[lo:hi]) })
		}},
		{"sum", ReduceSum, MethodAuto, func(t *InterpTable, x, out []float32) {
			parallel.For(len(x), grain, func(lo, hi int) { goColSum(t, x[lo:hi], out[lo:hi]) })
		}},
		{"none", ReduceNone, MethodAuto, func(t *InterpTable, x, out []float32) {
			parallel.For(len(x), grain/16, func(lo, hi int) { goDirectValues(t, t.fpT32, x[lo:hi], out[lo*m:hi*m]) })
		}},
		{"sumsq_direct", ReduceSumSq, MethodDirect, func(t *InterpTable, x, out []float32) {
			parallel.For(len(x), grain/16, func(lo, hi int) { goDirectReduce(t, t.fpT32, ReduceSumSq, x[lo:hi], out[lo:hi]) })
		}},
	}
	for _, c := range cases {
		tab, err := NewInterpTable(f, m, g, 0, 1.0/float64(g-1), c.r, c.me, tensor.Float32)
		if err != nil {
			b.Fatal(err)
		}
		op := NewInterp1D(tab, c.r, c.me, tensor.Float32, n)
		size := op.outShape().TotalSize()
		if len(out) < size {
			out = make([]float32, size)
			for i := range out { // fault the pages in before timing
				out[i] = 1
			}
		}
		op.out = tensor.New(tensor.WithShape(op.outShape()...), tensor.WithBacking(out[:size]))
		report := func(b *testing.B) {
			s := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(s*1e9/n, "ns/point")
			if c.r == ReduceNone {
				b.ReportMetric(float64(4*size)/s/1e9, "GB/s")
			}
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := op.Do(in); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
		b.Run(c.name+"/go", func(b *testing.B) {
			for b.Loop() {
				c.old(tab, x, out[:size])
			}
			report(b)
		})
		if c.r == ReduceNone {
			// The bound: clearing the same bytes on the same cores (the
			// runtime's memclr, non-temporal stores at this size).
			b.Run(c.name+"/clear", func(b *testing.B) {
				o := out[:size]
				for b.Loop() {
					parallel.For(n, grain/16, func(lo, hi int) { clear(o[lo*m : hi*m]) })
				}
				report(b)
			})
		}
	}
}

// The Go loops evalBatch ran before the cpukern kernels, kept for the
// benchmarks' comparison (BenchmarkInterp1DSeed).

func goGramSumSq[T float32 | float64](t *InterpTable, x, out []T) {
	out = out[:len(x)]
	for q, xv := range x {
		s, w := t.weights(float64(xv))
		e := t.gram[10*s : 10*s+10 : 10*s+10]
		d := w[0]*w[0]*e[0] + w[1]*w[1]*e[4] + w[2]*w[2]*e[7] + w[3]*w[3]*e[9]
		o := w[0]*(w[1]*e[1]+w[2]*e[2]+w[3]*e[3]) + w[1]*(w[2]*e[5]+w[3]*e[6]) + w[2]*w[3]*e[8]
		out[q] = T(d + 2*o)
	}
}

func goColSum[T float32 | float64](t *InterpTable, x, out []T) {
	out = out[:len(x)]
	for q, xv := range x {
		s, w := t.weights(float64(xv))
		c := t.colsum[s : s+4 : s+4]
		out[q] = T(w[0]*c[0] + w[1]*c[1] + w[2]*c[2] + w[3]*c[3])
	}
}

func goDirectValues[T float32 | float64](t *InterpTable, fpT, x, out []T) {
	m := t.M
	for q, xv := range x {
		s, w := t.weights(float64(xv))
		w0, w1, w2, w3 := T(w[0]), T(w[1]), T(w[2]), T(w[3])
		r0 := fpT[s*m : s*m+m]
		r1 := fpT[(s+1)*m : (s+1)*m+m]
		r2 := fpT[(s+2)*m : (s+2)*m+m]
		r3 := fpT[(s+3)*m : (s+3)*m+m]
		row := out[q*m : q*m+m]
		for j := range row {
			row[j] = w0*r0[j] + w1*r1[j] + w2*r2[j] + w3*r3[j]
		}
	}
}

func goDirectReduce[T float32 | float64](t *InterpTable, fpT []T, reduce Reduce, x, out []T) {
	m := t.M
	out = out[:len(x)]
	for q, xv := range x {
		s, w := t.weights(float64(xv))
		w0, w1, w2, w3 := T(w[0]), T(w[1]), T(w[2]), T(w[3])
		r0 := fpT[s*m : s*m+m]
		r1 := fpT[(s+1)*m : (s+1)*m+m]
		r2 := fpT[(s+2)*m : (s+2)*m+m]
		r3 := fpT[(s+3)*m : (s+3)*m+m]
		var acc float64
		if reduce == ReduceSumSq {
			for j := range r0 {
				v := float64(w0*r0[j] + w1*r1[j] + w2*r2[j] + w3*r3[j])
				acc += v * v
			}
		} else {
			for j := range r0 {
				acc += float64(w0*r0[j] + w1*r1[j] + w2*r2[j] + w3*r3[j])
			}
		}
		out[q] = T(acc)
	}
}
