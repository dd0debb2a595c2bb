package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
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
	f := widen(uniform32(rng, m*g))
	tab, err := NewInterpTable(f, m, g, 0, 1.0/float64(g-1), r, meth, tensor.Float32)
	if err != nil {
		b.Fatal(err)
	}
	x := uniform32(rng, n)
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
