package cpukern

// #include "pairu8.h"
import "C"

import (
	"math"
	"math/big"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/tapeloop/tapeloop/internal/parallel"
)

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

// NewU8Rows computes the rows' sums, on every core.
func NewU8Rows(x []uint8, n, d int) *U8Rows {
	if n < 0 || d < 0 || len(x) < n*d {
		panic("cpukern: NewU8Rows arguments out of range")
	}
	r := &U8Rows{X: x, N: n, D: d, Sum: make([]int64, n), SumSq: make([]int64, n)}
	if n == 0 || d == 0 {
		return r
	}
	parallel.For(n, max(1, (1<<20)/d), func(lo, hi int) {
		C.tl_u8_sums((*C.uint8_t)(unsafe.Pointer(&x[lo*d])), C.int64_t(hi-lo), C.int64_t(d), (*C.int64_t)(&r.Sum[lo]),
			(*C.int64_t)(&r.SumSq[lo]))
	})
	return r
}

// U8Value is an output type of PairU8.
type U8Value interface {
	float32 | float64 | int32 | int64
}

// U8MaxAbs is the largest |value| metric k can take over rows of d
// bytes: d·255² for dot and l2, d·255 for l1 (cosine: 1); 0 when it
// exceeds an int64 (ok false).
func U8MaxAbs(k U8Metric, d int) (v int64, ok bool) {
	per := int64(255 * 255)
	switch k {
	case U8L1:
		per = 255
	case U8Cosine:
		return 1, true
	}
	if d < 0 || int64(d) > math.MaxInt64/per {
		return 0, false
	}
	return int64(d) * per, true
}

// PairU8 sets out[i·ldo+j] to metric k of row a0+i and row b0+j of x, for
// i < m, j < n, exactly in integers, then converted (correctly rounded;
// cosine in float64, and for the float types only). An integer out must
// hold every value the metric can take (U8MaxAbs).
func PairU8[T U8Value](x *U8Rows, a0, m, b0, n int, k U8Metric, out []T, ldo int) {
	PairU8T(x, a0, m, b0, n, k, out, nil, ldo, n)
}

// PairU8T is PairU8 that, for the columns j ≥ tj, also stores the
// transposes at tout[j·ldo+i] (tout may be nil when tj ≥ n): with out at
// element (a0, b0) of a symmetric (N, N) matrix and tout at (b0, a0), ldo
// N, it fills both halves. It returns the sum of the integer values it
// stored, those stored twice counted twice (0 for cosine).
func PairU8T[T U8Value](x *U8Rows, a0, m, b0, n int, k U8Metric, out, tout []T, ldo, tj int) Int128 {
	d := x.D
	if m <= 0 || n <= 0 {
		return Int128{}
	}
	tj = max(tj, 0)
	if a0 < 0 || b0 < 0 || a0+m > x.N || b0+n > x.N || ldo < n || len(out) < (m-1)*ldo+n ||
		(tj < n && (ldo < m || len(tout) < (n-1)*ldo+m)) {
		panic("cpukern: PairU8 arguments out of range")
	}
	var typ C.int
	switch any(out).(type) {
	case []float32:
		typ = C.TL_OUT_F32
	case []float64:
		typ = C.TL_OUT_F64
	case []int32:
		typ = C.TL_OUT_I32
	default:
		typ = C.TL_OUT_I64
	}
	if k == U8Cosine && (typ == C.TL_OUT_I32 || typ == C.TL_OUT_I64) {
		panic("cpukern: PairU8 cosine into integers")
	}
	var tp unsafe.Pointer
	if tj < n {
		tp = unsafe.Pointer(&tout[0])
	}
	var sum [2]C.int64_t
	buf, scratch := u8Scratch(m, d, k)
	defer pairU8Pool.Put(buf)
	C.tl_pair_u8(C.int64_t(m), C.int64_t(n), C.int64_t(d), (*C.uint8_t)(unsafe.Pointer(&x.X[a0*d])), C.int64_t(d),
		(*C.uint8_t)(unsafe.Pointer(&x.X[b0*d])), C.int64_t(d), C.int(k), (*C.int64_t)(&x.Sum[a0]),
		(*C.int64_t)(&x.SumSq[a0]), (*C.int64_t)(&x.SumSq[b0]), unsafe.Pointer(&out[0]), tp, typ, C.int64_t(ldo),
		C.int64_t(min(tj, n)), &sum[0], scratch)
	return Int128{Hi: int64(sum[1]), Lo: uint64(sum[0])}
}

// PairU8Scratch is the memory a call of PairU8 or PairU8T over m rows of
// d bytes holds while it runs, for its packed copies of the rows; calls
// keep it for the next (about one set per core).
func PairU8Scratch(m, d int, k U8Metric) int64 {
	return int64(C.tl_pair_u8_scratch(C.int64_t(m), C.int64_t(d), C.int(k)))
}

// pairU8Pool holds the kernels' scratch between calls: fresh memory would
// cost its first touch of every page on every call.
var pairU8Pool = sync.Pool{New: func() any { return new([]byte) }}

// u8Scratch is scratch for a call over m rows of d bytes from pairU8Pool,
// and its first 64-byte aligned byte (nil when the kernels need none).
func u8Scratch(m, d int, k U8Metric) (*[]byte, unsafe.Pointer) {
	b := pairU8Pool.Get().(*[]byte)
	need := int(PairU8Scratch(m, d, k))
	if need == 0 {
		return b, nil
	}
	if len(*b) < need+64 {
		*b = make([]byte, need+64)
	}
	p := unsafe.Pointer(&(*b)[0])
	return b, unsafe.Add(p, (64-uintptr(p)%64)%64)
}

// Int128 is a 128-bit two's-complement integer: exact sums of many int64
// values.
type Int128 struct {
	Hi int64
	Lo uint64
}

// Add is s + o (wrapping beyond 128 bits).
func (s Int128) Add(o Int128) Int128 {
	lo, c := bits.Add64(s.Lo, o.Lo, 0)
	return Int128{Hi: s.Hi + o.Hi + int64(c), Lo: lo}
}

// Float64 is s correctly rounded.
func (s Int128) Float64() float64 {
	b := new(big.Int).Lsh(big.NewInt(s.Hi), 64)
	b.Add(b, new(big.Int).SetUint64(s.Lo))
	f, _ := new(big.Float).SetInt(b).Float64()
	return f
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
