package cpukern

// #cgo CFLAGS: -O3 -std=gnu11
// #cgo LDFLAGS: -lm
// #include "pairdist.h"
import "C"

import "unsafe"

// Kernel selects what PairDist computes for each pair of rows.
type Kernel int

// The pairwise kernels: the metrics TL_PAIR_ of pairdist.h.
const (
	L1  Kernel = C.TL_PAIR_L1  // −Σ_k |a_k − b_k|
	L2  Kernel = C.TL_PAIR_L2  // −Σ_k (a_k − b_k)²
	Dot Kernel = C.TL_PAIR_DOT // Σ_k a_k·b_k
)

// PairDist32 sets out[i·ldo+j] to kernel k of rows a[i·lda:] and b[j·ldb:]
// over d elements, for i < m, j < n. Each pair is summed in the same order
// wherever it sits, so a value does not depend on m, n or the row offsets:
// blocks and shards of a matrix agree bit for bit.
func PairDist32(m, n, d int, a []float32, lda int, b []float32, ldb int, out []float32, ldo int, k Kernel) {
	checkDims(m, n, d, len(a), lda, len(b), ldb, len(out), ldo)
	if m == 0 || n == 0 {
		return
	}
	C.tl_pairdist_f32(C.int64_t(m), C.int64_t(n), C.int64_t(d), (*C.float)(unsafe.Pointer(&a[0])), C.int64_t(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.int64_t(ldb), (*C.float)(unsafe.Pointer(&out[0])), C.int64_t(ldo), C.int(k))
}

// DotUpper32 is PairDist32 with Dot for the pairs with j+lower ≥ i only
// (lower ≥ 0), the upper triangle of a symmetric product whose columns
// start lower rows after its rows: the other entries of out either keep
// what they held or get their values. A pair's value is PairDist32's.
func DotUpper32(m, n, d int, a []float32, lda int, b []float32, ldb int, out []float32, ldo, lower int) {
	checkDims(m, n, d, len(a), lda, len(b), ldb, len(out), ldo)
	if lower < 0 {
		panic("cpukern: DotUpper32 with lower < 0")
	}
	if m == 0 || n == 0 {
		return
	}
	C.tl_dot_upper_f32(C.int64_t(m), C.int64_t(n), C.int64_t(d), (*C.float)(unsafe.Pointer(&a[0])), C.int64_t(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.int64_t(ldb), (*C.float)(unsafe.Pointer(&out[0])), C.int64_t(ldo), C.int64_t(lower))
}

// PairDist64 is PairDist32 for float64.
func PairDist64(m, n, d int, a []float64, lda int, b []float64, ldb int, out []float64, ldo int, k Kernel) {
	checkDims(m, n, d, len(a), lda, len(b), ldb, len(out), ldo)
	if m == 0 || n == 0 {
		return
	}
	C.tl_pairdist_f64(C.int64_t(m), C.int64_t(n), C.int64_t(d), (*C.double)(unsafe.Pointer(&a[0])), C.int64_t(lda),
		(*C.double)(unsafe.Pointer(&b[0])), C.int64_t(ldb), (*C.double)(unsafe.Pointer(&out[0])), C.int64_t(ldo), C.int(k))
}

// PairDistISA names the instruction set the distance kernels run on, as
// every kernel family of the package does: "avx512f", "avx2" or "sse2" on
// x86-64, "neon" on arm64, "generic" elsewhere.
func PairDistISA() string { return C.GoString(C.tl_pairdist_isa()) }

// The instruction sets the kernels dispatch to, in increasing order: the
// levels of TL_ISA_ in pairdist.h. isaBase, the architecture's baseline
// (SSE2 on x86-64, NEON on arm64), is the only level outside x86-64.
const (
	isaBase   = C.TL_ISA_BASE
	isaAVX2   = C.TL_ISA_AVX2
	isaAVX512 = C.TL_ISA_AVX512
)

// isaTop is the highest level this build has kernels for.
var isaTop = int(C.tl_isa_top())

// limitISA makes the kernels use at most level isa and returns the one
// they used before, so that tests reach every path on one machine. Not
// safe while kernels run.
func limitISA(isa int) int { return int(C.tl_limit_isa(C.int(isa))) }

// checkDims panics, as BLAS does, on arguments that would read or write
// outside the slices; with d == 0 no element is read.
func checkDims(m, n, d, la, lda, lb, ldb, lo, ldo int) {
	switch {
	case m < 0 || n < 0 || d < 0:
		panic("cpukern: negative dimension")
	case m > 0 && (lda < max(d, 1) || la < (m-1)*lda+d):
		panic("cpukern: short a")
	case n > 0 && (ldb < max(d, 1) || lb < (n-1)*ldb+d):
		panic("cpukern: short b")
	case m > 0 && n > 0 && (ldo < n || lo < (m-1)*ldo+n):
		panic("cpukern: short out")
	case m > 0 && n > 0 && d == 0:
		panic("cpukern: d == 0")
	}
}
