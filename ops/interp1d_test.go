package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// refInterp is the seed's semantics written out literally, in float64:
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

func relErr(got, want []float64) float64 {
	var num, den float64
	for i := range want {
		d := got[i] - want[i]
		num += d * d
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

func runOp(t *testing.T, tab *InterpTable, r Reduce, meth Method, dt tensor.Dtype, x []float64) []float64 {
	t.Helper()
	op := NewInterp1D(tab, r, meth, dt, len(x))
	var in *tensor.Dense
	if dt == tensor.Float32 {
		x32 := make([]float32, len(x))
		for i, v := range x {
			x32[i] = float32(v)
		}
		in = tensor.New(tensor.WithBacking(x32))
	} else {
		in = tensor.New(tensor.WithBacking(append([]float64(nil), x...)))
	}
	v, err := op.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	out := v.(*tensor.Dense)
	// Poison the buffer and run again: every element must be rewritten.
	switch d := out.Data().(type) {
	case []float32:
		for i := range d {
			d[i] = float32(math.NaN())
		}
	case []float64:
		for i := range d {
			d[i] = math.NaN()
		}
	}
	if v2, err := op.Do(in); err != nil || v2 != v {
		t.Fatalf("second Do: err %v, same buffer %v", err, v2 == v)
	}
	var got []float64
	switch d := out.Data().(type) {
	case []float32:
		for _, v := range d {
			got = append(got, float64(v))
		}
	case []float64:
		got = append(got, d...)
	}
	return got
}

func TestInterp1DMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct{ m, g int }{{1, 4}, {7, 5}, {13, 64}, {300, 257}}
	for _, c := range cases {
		a := rng.NormFloat64() * 3
		dx := 0.01 + rng.Float64()
		f := make([]float64, c.m*c.g)
		for i := range f {
			f[i] = rng.NormFloat64() + 0.5
		}
		x := testQueries(rng, 997, a, dx, c.g)
		// The reference takes x as float32 would round it, so both
		// dtypes are compared on the same points.
		for i := range x {
			x[i] = float64(float32(x[i]))
		}
		for _, r := range []Reduce{ReduceSumSq, ReduceSum, ReduceNone} {
			var want []float64
			for _, xv := range x {
				want = append(want, refReduce(refInterp(f, c.m, c.g, a, dx, xv), r)...)
			}
			for _, meth := range []Method{MethodAuto, MethodDirect} {
				for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
					name := fmt.Sprintf("M%d_G%d/%v/%v/%v", c.m, c.g, r, meth, dt)
					t.Run(name, func(t *testing.T) {
						tab, err := NewInterpTable(f, c.m, c.g, a, dx, r, meth, dt)
						if err != nil {
							t.Fatal(err)
						}
						got := runOp(t, tab, r, meth, dt, x)
						tol := 1e-12
						if dt == tensor.Float32 {
							tol = 1e-5
						}
						if e := relErr(got, want); !(e <= tol) {
							t.Errorf("relative error %.3g > %.0g", e, tol)
						}
					})
				}
			}
		}
	}
}

func TestInterp1DReproducesQuadratic(t *testing.T) {
	// The cubic scheme reproduces polynomials up to degree 3 inside the
	// grid (away from the zero padding): f = x² must come back exactly.
	const g = 101
	dx := 1.0 / (g - 1)
	f := make([]float64, g)
	for i := range f {
		x := float64(i) * dx
		f[i] = x * x
	}
	tab, err := NewInterpTable(f, 1, g, 0, dx, ReduceNone, MethodAuto, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{0.1, 0.2345, 0.5, 0.777, 0.9}
	got := runOp(t, tab, ReduceNone, MethodAuto, tensor.Float64, x)
	for i, xv := range x {
		want := xv * xv
		if math.Abs(got[i]-want) > 1e-12 {
			t.Errorf("x=%g: got %.15g, want %.15g", xv, got[i], want)
		}
	}
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
	f := make([]float64, m*g)
	for i := range f {
		f[i] = rng.Float64()
	}
	tab, err := NewInterpTable(f, m, g, 0, 1.0/float64(g-1), r, meth, tensor.Float32)
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()
	}
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
