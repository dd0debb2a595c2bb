package cpukern

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The cubic weight polynomials, as ops.InterpTable has them.
var (
	refA = [4]float64{-1.0 / 16, 9.0 / 16, 9.0 / 16, -1.0 / 16}
	refB = [4]float64{1.0 / 24, -9.0 / 8, 9.0 / 8, -1.0 / 24}
	refC = [4]float64{1.0 / 4, -1.0 / 4, -1.0 / 4, 1.0 / 4}
	refD = [4]float64{-1.0 / 6, 1.0 / 2, -1.0 / 2, 1.0 / 6}
)

// refPlace is CubicGrid's placement of x, the plain Go loop the ops package
// ran before the kernels; mag bounds the weights' terms, |w_k| and the
// error of any order of evaluating them.
func refPlace(g CubicGrid, x float64) (s int, w, mag [4]float64) {
	if x < g.A {
		x = g.A
	} else if x > g.Ub {
		x = g.Ub
	}
	u := (x - g.A) / g.Dx
	fi := math.Floor(u)
	r := u - (fi + 0.5)
	s = int(fi)
	if s < 0 || fi != fi {
		s = 0
	} else if s > g.G-2 {
		s = g.G - 2
	}
	ar := math.Abs(r)
	for k := range w {
		w[k] = refA[k] + r*(refB[k]+r*(refC[k]+r*refD[k]))
		mag[k] = math.Abs(refA[k]) + ar*(math.Abs(refB[k])+ar*(math.Abs(refC[k])+ar*math.Abs(refD[k])))
	}
	return s, w, mag
}

// interpFixture is m interpolants on a grid in the layouts the kernels
// read: the padded values transposed, (G+2, m), the Gram entries and the
// column sums.
type interpFixture struct {
	grid   CubicGrid
	m      int
	fpT    []float64
	gram   []float64
	colsum []float64
}

func newInterpFixture(rng *rand.Rand, m, g int) *interpFixture {
	a, dx := rng.NormFloat64()*3, 0.01+rng.Float64()
	f := &interpFixture{grid: CubicGrid{G: g, A: a, Dx: dx, Ub: a + float64(g+1)*dx}, m: m}
	p := g + 2
	f.fpT = make([]float64, p*m)
	for i := 1; i <= g; i++ {
		for j := range m {
			f.fpT[i*m+j] = float64(float32(rng.NormFloat64() + 0.5))
		}
	}
	f.colsum = make([]float64, p)
	for i := range p {
		for j := range m {
			f.colsum[i] += f.fpT[i*m+j]
		}
	}
	f.gram = make([]float64, 10*(g-1))
	for s := range g - 1 {
		e := f.gram[10*s:]
		n := 0
		for k := range 4 {
			for l := k; l < 4; l++ {
				for j := range m {
					e[n] += f.fpT[(s+k)*m+j] * f.fpT[(s+l)*m+j]
				}
				n++
			}
		}
	}
	return f
}

// interpQueries are n points inside the grid, below it, above it, on its
// nodes and bounds, and NaN and ±Inf.
func interpQueries(rng *rand.Rand, n int, g CubicGrid) []float64 {
	x := make([]float64, n)
	for i := range x {
		switch i % 11 {
		case 0:
			x[i] = g.A - rng.Float64()*5*g.Dx
		case 1:
			x[i] = g.Ub + rng.Float64()*5*g.Dx
		case 2:
			x[i] = g.A + float64(rng.IntN(g.G+2))*g.Dx
		case 3:
			x[i] = []float64{g.A, g.Ub, g.A + float64(g.G-1)*g.Dx, math.NaN(), math.Inf(1), math.Inf(-1)}[rng.IntN(6)]
		default:
			x[i] = g.A + rng.Float64()*(g.Ub-g.A)
		}
	}
	return x
}

// TestInterpKernels checks every kernel on every instruction set against
// the plain Go loops, within a few roundings of the element type of the
// largest term: odd batch sizes (vector tails), M below, at and around a
// vector's length, float32 and float64, with guard values after dst.
func TestInterpKernels(t *testing.T) {
	top := limitISA(isaAVX512)
	defer limitISA(top)
	for isa := top; isa >= isaBase; isa-- {
		limitISA(isa)
		t.Run([]string{"sse2", "avx2", "avx512f"}[isa], func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, 22))
			for _, sz := range [][3]int{{1, 4, 1}, {3, 5, 7}, {15, 6, 33}, {16, 64, 64}, {17, 33, 101}, {300, 257, 1001}, {1, 4096, 999}, {3, 40, 20011}} {
				m, g, n := sz[0], sz[1], sz[2]
				f := newInterpFixture(rng, m, g)
				x := interpQueries(rng, n, f.grid)
				t.Run(fmt.Sprintf("M%d_G%d_N%d/float32", m, g, n), func(t *testing.T) { checkInterp32(t, f, x) })
				t.Run(fmt.Sprintf("M%d_G%d_N%d/float64", m, g, n), func(t *testing.T) { checkInterp64(t, f, x) })
			}
		})
	}
}

func checkInterp32(t *testing.T, f *interpFixture, x []float64) {
	xs := make([]float32, len(x))
	for i, v := range x {
		xs[i] = float32(v)
	}
	fpT := make([]float32, len(f.fpT))
	for i, v := range f.fpT {
		fpT[i] = float32(v)
	}
	checkInterpKernels(t, f, xs, fpT, 0x1p-24)
}

func checkInterp64(t *testing.T, f *interpFixture, x []float64) {
	checkInterpKernels(t, f, x, f.fpT, 0x1p-53)
}

// interpGuard fills dst past the end: no kernel may change it.
const interpGuard = 12345

func checkInterpKernels[T float32 | float64](t *testing.T, f *interpFixture, x, fpT []T, eps float64) {
	n, m, g := len(x), f.m, f.grid
	// want and bound: the Go loops' value and the sum of the magnitudes of
	// its terms, which bounds the error of any order of summation.
	gram, gramB := make([]float64, n), make([]float64, n)
	sum, sumB := make([]float64, n), make([]float64, n)
	vals, valsB := make([]float64, n*m), make([]float64, n*m)
	dsq, dsqB, dsum, dsumB := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, xv := range x {
		s, w, ab := refPlace(g, float64(xv))
		e := f.gram[10*s : 10*s+10]
		d := w[0]*w[0]*e[0] + w[1]*w[1]*e[4] + w[2]*w[2]*e[7] + w[3]*w[3]*e[9]
		o := w[0]*(w[1]*e[1]+w[2]*e[2]+w[3]*e[3]) + w[1]*(w[2]*e[5]+w[3]*e[6]) + w[2]*w[3]*e[8]
		gram[i] = float64(T(d + 2*o))
		gramB[i] = ab[0]*ab[0]*e[0] + ab[1]*ab[1]*e[4] + ab[2]*ab[2]*e[7] + ab[3]*ab[3]*e[9] +
			2*(ab[0]*(ab[1]*math.Abs(e[1])+ab[2]*math.Abs(e[2])+ab[3]*math.Abs(e[3]))+ab[1]*(ab[2]*math.Abs(e[5])+ab[3]*math.Abs(e[6]))+ab[2]*ab[3]*math.Abs(e[8]))
		c := f.colsum[s : s+4]
		sum[i] = float64(T(w[0]*c[0] + w[1]*c[1] + w[2]*c[2] + w[3]*c[3]))
		sumB[i] = ab[0]*math.Abs(c[0]) + ab[1]*math.Abs(c[1]) + ab[2]*math.Abs(c[2]) + ab[3]*math.Abs(c[3])
		w0, w1, w2, w3 := T(w[0]), T(w[1]), T(w[2]), T(w[3])
		for j := range m {
			r0, r1, r2, r3 := fpT[s*m+j], fpT[(s+1)*m+j], fpT[(s+2)*m+j], fpT[(s+3)*m+j]
			v := float64(w0*r0 + w1*r1 + w2*r2 + w3*r3)
			b := ab[0]*math.Abs(float64(r0)) + ab[1]*math.Abs(float64(r1)) + ab[2]*math.Abs(float64(r2)) + ab[3]*math.Abs(float64(r3))
			vals[i*m+j], valsB[i*m+j] = v, b
			dsq[i] += v * v
			dsqB[i] += b * b
			dsum[i] += v
			dsumB[i] += b
		}
		dsq[i], dsum[i] = float64(T(dsq[i])), float64(T(dsum[i]))
	}

	// tol: a few roundings of the element type, and of float64 over the
	// sums along M, relative to the sum of the terms' magnitudes.
	run := func(name string, want, bound []float64, per int, tol float64, call func(dst []T)) {
		t.Helper()
		dst := make([]T, len(want)+3)
		for i := range dst {
			dst[i] = interpGuard
		}
		call(dst[:len(want)])
		for i, v := range dst[len(want):] {
			if v != interpGuard {
				t.Fatalf("%s: wrote dst[%d] past the end", name, len(want)+i)
			}
		}
		bad := 0
		for i, w := range want {
			got, xv := float64(dst[i]), x[i/per]
			if math.IsNaN(w) && !math.IsNaN(got) || !math.IsNaN(w) && !(math.Abs(got-w) <= tol*bound[i]) {
				t.Errorf("%s[%d] (x = %g) = %.9g, want %.9g (tolerance %.3g)", name, i, xv, got, w, tol*bound[i])
				if bad++; bad > 5 {
					t.FailNow()
				}
			}
		}
	}
	tol, tolM := 8*eps, 8*eps+float64(m)*0x1p-50
	run("gram", gram, gramB, 1, tol, func(dst []T) { InterpGram(dst, x, g, f.gram) })
	run("colsum", sum, sumB, 1, tol, func(dst []T) { InterpColSum(dst, x, g, f.colsum) })
	// The direct kernels in query order and sorted by cell.
	for _, sorted := range []bool{false, true} {
		sb := int64(math.MaxInt64)
		if sorted {
			sb = 0
		}
		defer interpSortBytes(interpSortBytes(sb))
		o := fmt.Sprintf(" (sorted %v)", sorted)
		run("values"+o, vals, valsB, m, tol, func(dst []T) { InterpValues(dst, x, g, fpT, m, false) })
		run("values streamed"+o, vals, valsB, m, tol, func(dst []T) { InterpValues(dst, x, g, fpT, m, true) })
		run("sumsq"+o, dsq, dsqB, 1, tolM, func(dst []T) { InterpReduce(dst, x, g, fpT, m, true) })
		run("sum"+o, dsum, dsumB, 1, tolM, func(dst []T) { InterpReduce(dst, x, g, fpT, m, false) })
		// Rows that start anywhere in a cache line, streamed.
		for _, off := range []int{1, 5} {
			run(fmt.Sprintf("values streamed at +%d%s", off, o), vals, valsB, m, tol, func(dst []T) {
				d := make([]T, off+len(dst))
				for i := range d {
					d[i] = interpGuard
				}
				InterpValues(d[off:], x, g, fpT, m, true)
				for i, v := range d[:off] {
					if v != interpGuard {
						t.Fatalf("values streamed at +%d: wrote %d before dst", off, off-i)
					}
				}
				copy(dst, d[off:])
			})
		}
	}
}
