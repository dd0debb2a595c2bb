package cpukern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPairU8Exact: every metric of random 8-bit images, N odd and D not a
// multiple of 64 (and D above the int32 block), bit-equal to an int64
// reference converted the same way, with VNNI and with the portable loops.
func TestPairU8Exact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 23))
	defer limitU8(true)
	for _, vnni := range []bool{true, false} {
		limitU8(vnni)
		for _, sz := range [][2]int{{1, 1}, {7, 63}, {13, 65}, {9, 1000}, {150, 1002}, {5, 700_001}} {
			n, d := sz[0], sz[1]
			x := make([]uint8, n*d)
			for i := range x {
				x[i] = uint8(rng.IntN(256))
			}
			if d > 1000 { // the extremes: the largest products
				for i := range x[:d] {
					x[i] = 255
				}
			}
			rows := NewU8Rows(x, n, d)
			for _, k := range []U8Metric{U8L1, U8L2, U8Dot, U8Cosine} {
				m := n - 1 + min(1, n-1) // rows [1, n): a block not at row 0 (all when n is 1)
				a0 := n - m
				o32, o64 := make([]float32, m*n), make([]float64, m*n)
				PairU8(rows, a0, m, 0, n, k, o32, n)
				PairU8(rows, a0, m, 0, n, k, o64, n)
				for i := range m {
					for j := range n {
						a, b := x[(a0+i)*d:(a0+i+1)*d], x[j*d:(j+1)*d]
						var dot, l1, sa, sb int64
						for q := range d {
							p, r := int64(a[q]), int64(b[q])
							dot += p * r
							l1 += max(p-r, r-p)
							sa += p * p
							sb += r * r
						}
						var want float64
						switch k {
						case U8L1:
							want = float64(-l1)
						case U8L2:
							want = float64(-(sa + sb - 2*dot))
						case U8Dot:
							want = float64(dot)
						case U8Cosine:
							want = float64(dot) / (math.Sqrt(float64(sa)) * math.Sqrt(float64(sb)))
						}
						if o64[i*n+j] != want || o32[i*n+j] != float32(want) {
							t.Fatalf("vnni %v n %d d %d metric %d pair (%d, %d): %v, %v, want %v", vnni, n, d, k, a0+i, j, o64[i*n+j], o32[i*n+j], want)
						}
					}
				}
			}
		}
	}
}

// BenchmarkPairU8: 8-bit dot products and L1 distances beside the float32
// kernels on the same images (converted), one thread, 256 rows against
// 1024 of 10⁴ values.
func BenchmarkPairU8(b *testing.B) {
	const m, n, d = 256, 1024, 10_000
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]uint8, n*d)
	f := make([]float32, n*d)
	for i := range x {
		x[i] = uint8(rng.IntN(256))
		f[i] = float32(x[i])
	}
	rows := NewU8Rows(x, n, d)
	out := make([]float32, m*n)
	rate := func(b *testing.B) {
		b.ReportMetric(float64(m*n*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gpairdims/s")
	}
	b.Run("u8-dot", func(b *testing.B) {
		for b.Loop() {
			PairU8(rows, 0, m, 0, n, U8Dot, out, n)
		}
		rate(b)
	})
	b.Run("f32-dot", func(b *testing.B) {
		for b.Loop() {
			PairDist32(m, n, d, f, d, f, d, out, n, Dot)
		}
		rate(b)
	})
	// The shape of the affinity command's calls on 4 KiB images: a block
	// of 1024 rows against a core's share of the columns.
	const bm, bn, bd = 1024, 3000, 4096
	bx := make([]uint8, bn*bd)
	for i := range bx {
		bx[i] = uint8(rng.IntN(256))
	}
	brows, bout := NewU8Rows(bx, bn, bd), make([]int32, bm*bn)
	b.Run("u8-dot-block", func(b *testing.B) {
		for b.Loop() {
			PairU8(brows, 0, bm, 0, bn, U8Dot, bout, bn)
		}
		b.ReportMetric(float64(bm*bn*bd)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gpairdims/s")
	})
	b.Run("u8-l1", func(b *testing.B) {
		for b.Loop() {
			PairU8(rows, 0, m, 0, n, U8L1, out, n)
		}
		rate(b)
	})
	b.Run("f32-l1", func(b *testing.B) {
		for b.Loop() {
			PairDist32(m, n, d, f, d, f, d, out, n, L1)
		}
		rate(b)
	})
}

// refU8 is metric k of rows a and b, in int64 arithmetic.
func refU8(k U8Metric, a, b []uint8) int64 {
	var dot, l1, sa, sb int64
	for q := range a {
		p, r := int64(a[q]), int64(b[q])
		dot += p * r
		l1 += max(p-r, r-p)
		sa += p * p
		sb += r * r
	}
	switch k {
	case U8L1:
		return -l1
	case U8L2:
		return -(sa + sb - 2*dot)
	}
	return dot
}

// TestPairU8Symmetric: integer and float outputs of the integer metrics
// written into a symmetric matrix block by block, each block's upper part
// and its transposes below (PairU8T), equal an int64 reference loop at
// every element, the elements outside the blocks' reach untouched, and
// the returned sum equals the reference's; with VNNI and the portable
// loops, N odd and D not a multiple of 4.
func TestPairU8Symmetric(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 37))
	defer limitU8(true)
	for _, vnni := range []bool{true, false} {
		limitU8(vnni)
		for _, sz := range [][3]int{{1, 1, 1}, {37, 63, 5}, {71, 1001, 13}, {45, 130, 45}} {
			n, d, blk := sz[0], sz[1], sz[2]
			x := make([]uint8, n*d)
			for i := range x {
				x[i] = uint8(rng.IntN(256))
			}
			for i := range x[:d] {
				x[i] = 255
			}
			rows := NewU8Rows(x, n, d)
			for _, k := range []U8Metric{U8L1, U8L2, U8Dot} {
				want := make([]int64, n*n)
				var total int64
				for i := range n {
					for j := range n {
						want[i*n+j] = refU8(k, x[i*d:(i+1)*d], x[j*d:(j+1)*d])
						total += want[i*n+j]
					}
				}
				checkSym[int64](t, rows, k, want, total, n, blk, vnni)
				checkSym[int32](t, rows, k, want, total, n, blk, vnni)
				checkSym[float64](t, rows, k, want, total, n, blk, vnni)
				checkSym[float32](t, rows, k, want, total, n, blk, vnni)
			}
		}
	}
}

// checkSym fills an (n, n) matrix of T in blocks of blk rows, each block
// from its first row's column on in two calls (columns split at an odd
// place), and checks it against want.
func checkSym[T U8Value](t *testing.T, rows *U8Rows, k U8Metric, want []int64, total int64, n, blk int, vnni bool) {
	t.Helper()
	const guard = -7
	full := make([]T, n*n+1)
	for i := range full {
		full[i] = guard
	}
	var sum Int128
	for lo := 0; lo < n; lo += blk {
		m := min(blk, n-lo)
		split := lo + (n-lo)/3
		for _, c := range [][2]int{{lo, split}, {split, n}} {
			if c[1] > c[0] {
				sum = sum.Add(PairU8T(rows, lo, m, c[0], c[1]-c[0], k, full[lo*n+c[0]:], full[c[0]*n+lo:], n, lo+m-c[0]))
			}
		}
	}
	for i, w := range want {
		if float64(full[i]) != float64(T(w)) {
			t.Fatalf("%T vnni %v n %d d %d metric %d: element (%d, %d) is %v, want %v", full[0], vnni, n, rows.D, k, i/n, i%n, full[i], w)
		}
	}
	if full[n*n] != guard {
		t.Fatalf("%T: written past the matrix", full[0])
	}
	if sum.Hi != total>>63 || int64(sum.Lo) != total || sum.Float64() != float64(total) {
		t.Fatalf("%T vnni %v n %d metric %d: sum %+v, want %d", full[0], vnni, n, k, sum, total)
	}
}
