package cpukern

// #include "pairu8.h"
import "C"

import "unsafe"

// U8Metric is what PairU8 computes for each pair of 8-bit rows.
type U8Metric int

// The metrics of PairU8, exact in integers.
const (
	U8L1     U8Metric = iota // −Σ|a−b|
	U8L2                     // −Σ(a−b)²
	U8Dot                    // Σa·b
	U8Cosine                 // Σa·b / (‖a‖·‖b‖), from the exact sums
)

// U8Rows are 8-bit rows with the sums PairU8 needs: Σx and Σx² per row.
type U8Rows struct {
	X     []uint8 // (N, D) row-major
	N, D  int
	Sum   []int64
	SumSq []int64
}

// NewU8Rows computes the rows' sums.
func NewU8Rows(x []uint8, n, d int) *U8Rows {
	r := &U8Rows{X: x, N: n, D: d, Sum: make([]int64, n), SumSq: make([]int64, n)}
	for i := range n {
		var s, q int64
		for _, v := range x[i*d : (i+1)*d] {
			s += int64(v)
			q += int64(v) * int64(v)
		}
		r.Sum[i], r.SumSq[i] = s, q
	}
	return r
}

// PairU8 sets out[i·ldo+j] (out a []float32 or []float64) to metric k of
// row a0+i and row b0+j of x, for i < m, j < n, exactly in integers, then
// converted (correctly rounded; cosine in float64).
func PairU8[T float32 | float64](x *U8Rows, a0, m, b0, n int, k U8Metric, out []T, ldo int) {
	d := x.D
	if m <= 0 || n <= 0 {
		return
	}
	if a0 < 0 || b0 < 0 || a0+m > x.N || b0+n > x.N || ldo < n || len(out) < (m-1)*ldo+n {
		panic("cpukern: PairU8 arguments out of range")
	}
	var o32 *C.float
	var o64 *C.double
	switch o := any(out).(type) {
	case []float32:
		o32 = (*C.float)(&o[0])
	case []float64:
		o64 = (*C.double)(&o[0])
	}
	C.tl_pair_u8(C.int64_t(m), C.int64_t(n), C.int64_t(d), (*C.uint8_t)(unsafe.Pointer(&x.X[a0*d])), C.int64_t(d),
		(*C.uint8_t)(unsafe.Pointer(&x.X[b0*d])), C.int64_t(d), C.int(k), (*C.int64_t)(&x.Sum[a0]),
		(*C.int64_t)(&x.SumSq[a0]), (*C.int64_t)(&x.SumSq[b0]), o32, o64, C.int64_t(ldo))
}

// limitU8 makes PairU8 use its portable loops (vnni false) or what the CPU
// has, for tests; not safe while kernels run.
func limitU8(vnni bool) bool {
	v := 0
	if vnni {
		v = 1
	}
	return C.tl_pair_u8_limit(C.int(v)) == 1
}
