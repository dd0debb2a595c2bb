package cpukern

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tapeloop/tapeloop/internal/parallel"
)

// refDist is the definition, in float64.
func refDist(m, n, d int, a []float64, b []float64, kern Kernel) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for k := 0; k < d; k++ {
				x, y := a[i*d+k], b[j*d+k]
				switch kern {
				case L1:
					s -= math.Abs(x - y)
				case L2:
					s -= (x - y) * (x - y)
				default:
					s += x * y
				}
			}
			out[i*n+j] = s
		}
	}
	return out
}

func TestPairDistMatchesDefinition(t *testing.T) {
	t.Logf("kernels run on %s", PairDistISA())
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][3]int{{1, 1, 1}, {4, 4, 16}, {5, 7, 3}, {9, 130, 1031}, {13, 6, 2500}, {17, 1100, 300}, {3, 33, 257}} {
		m, n, d := sz[0], sz[1], sz[2]
		a64 := make([]float64, m*d)
		b64 := make([]float64, n*d)
		for i := range a64 {
			a64[i] = float64(float32(rng.NormFloat64()))
		}
		for i := range b64 {
			b64[i] = float64(float32(rng.NormFloat64()))
		}
		a32, b32 := to32(a64), to32(b64)
		for _, kern := range []Kernel{L1, L2, Dot} {
			want := refDist(m, n, d, a64, b64, kern)
			// Outputs with a leading dimension wider than n, guard values
			// around every row: only the (m, n) window may change.
			const guard = 7
			ldo := n + guard
			o32 := make([]float32, m*ldo)
			o64 := make([]float64, m*ldo)
			for i := range o32 {
				o32[i], o64[i] = 12345, 12345
			}
			PairDist32(m, n, d, a32, d, b32, d, o32, ldo, kern)
			PairDist64(m, n, d, a64, d, b64, d, o64, ldo, kern)
			name := fmt.Sprintf("%dx%dx%d kernel=%d", m, n, d, kern)
			var e32, e64, den float64
			for i := 0; i < m; i++ {
				for j := 0; j < ldo; j++ {
					if j >= n {
						if o32[i*ldo+j] != 12345 || o64[i*ldo+j] != 12345 {
							t.Fatalf("%s: guard at (%d, %d) overwritten", name, i, j)
						}
						continue
					}
					w := want[i*n+j]
					e32 += math.Pow(float64(o32[i*ldo+j])-w, 2)
					e64 += math.Pow(o64[i*ldo+j]-w, 2)
					den += w * w
				}
			}
			if r := math.Sqrt(e32 / den); r > 1e-6 {
				t.Errorf("%s float32: relative error %.3g", name, r)
			}
			if r := math.Sqrt(e64 / den); r > 1e-14 {
				t.Errorf("%s float64: relative error %.3g", name, r)
			}
		}
	}
}

// TestPairDistBlocksAgree: a value does not depend on where its pair sits:
// the matrix computed whole, by row blocks and by column blocks at odd
// offsets, agrees bit for bit (shards of a run merge into one run's
// matrix), for every kernel on every instruction set.
func TestPairDistBlocksAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const m, n, d = 29, 1077, 777
	a, b := make([]float32, m*d), make([]float32, n*d)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range b {
		b[i] = float32(rng.NormFloat64())
	}
	top := limitISA(isaAVX512)
	defer limitISA(top)
	for isa := top; isa >= isaBase; isa-- {
		limitISA(isa)
		for _, kern := range []Kernel{L1, L2, Dot} {
			whole := make([]float32, m*n)
			PairDist32(m, n, d, a, d, b, d, whole, n, kern)
			parts := make([]float32, m*n)
			for _, r := range [][2]int{{0, 5}, {5, 18}, {18, m}} {
				for _, c := range [][2]int{{0, 33}, {33, 700}, {700, n}} {
					PairDist32(r[1]-r[0], c[1]-c[0], d, a[r[0]*d:], d, b[c[0]*d:], d, parts[r[0]*n+c[0]:], n, kern)
				}
			}
			for i := range whole {
				if whole[i] != parts[i] {
					t.Fatalf("isa %d kernel %d: entry (%d, %d) is %v whole, %v in blocks", isa, kern, i/n, i%n, whole[i], parts[i])
				}
			}
		}
	}
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// benchmarkPairDist runs a kernel on a 256-row block against 2048 rows of
// 10,000 dimensions, split over the cores as the op splits it, reporting
// pair-dimensions per second.
func benchmarkPairDist(b *testing.B, kern Kernel) {
	const m, n, d = 256, 2048, 10000
	rng := rand.New(rand.NewPCG(3, 4))
	a := make([]float32, m*d)
	x := make([]float32, n*d)
	for i := range a {
		a[i] = rng.Float32()
	}
	for i := range x {
		x[i] = rng.Float32()
	}
	out := make([]float32, m*n)
	b.Logf("isa %s", PairDistISA())
	for b.Loop() {
		parallel.For(m, 4, func(lo, hi int) {
			PairDist32(hi-lo, n, d, a[lo*d:], d, x, d, out[lo*n:], n, kern)
		})
	}
	b.ReportMetric(float64(m)*n*d*float64(b.N)/b.Elapsed().Seconds(), "pair-dims/s")
}

func BenchmarkPairDistL1(b *testing.B)  { benchmarkPairDist(b, L1) }
func BenchmarkPairDistL2(b *testing.B)  { benchmarkPairDist(b, L2) }
func BenchmarkPairDistDot(b *testing.B) { benchmarkPairDist(b, Dot) }

// TestDotUpper: DotUpper32 gives PairDist32's values, bit for bit, for
// every pair on or above the shifted diagonal (j+lower ≥ i), and leaves or
// sets the others, on every instruction set, for shapes with tails in m,
// n and the k blocks and diagonals that cut tiles.
func TestDotUpper(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	top := limitISA(isaAVX512)
	defer limitISA(top)
	for isa := top; isa >= isaBase; isa-- {
		limitISA(isa)
		for _, sz := range [][4]int{{1, 1, 1, 0}, {37, 45, 777, 0}, {37, 45, 777, 5}, {70, 600, 400, 33}, {9, 20, 385, 100}, {64, 64, 64, 0}} {
			m, n, d, lower := sz[0], sz[1], sz[2], sz[3]
			a, b := make([]float32, m*d), make([]float32, n*d)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64())
			}
			const guard = 3
			ldo := n + guard
			want, got := make([]float32, m*ldo), make([]float32, m*ldo)
			for i := range got {
				got[i] = 12345
			}
			PairDist32(m, n, d, a, d, b, d, want, ldo, Dot)
			DotUpper32(m, n, d, a, d, b, d, got, ldo, lower)
			for i := range m {
				for j := range ldo {
					g := got[i*ldo+j]
					switch {
					case j >= n && g != 12345:
						t.Fatalf("isa %d %v: guard at (%d, %d) overwritten", isa, sz, i, j)
					case j < n && j+lower >= i && g != want[i*ldo+j]:
						t.Fatalf("isa %d %v: pair (%d, %d) is %v, want %v", isa, sz, i, j, g, want[i*ldo+j])
					case j < n && g != 12345 && g != want[i*ldo+j]:
						t.Fatalf("isa %d %v: pair (%d, %d) below the diagonal is %v, want %v or untouched", isa, sz, i, j, g, want[i*ldo+j])
					}
				}
			}
		}
	}
}
