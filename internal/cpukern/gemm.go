package cpukern

// #include "gemm.h"
// #include "pairdist.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// GEMM reports whether float32 dot products run on the packed matrix
// product (an x86-64 CPU with AVX-512, not limited below it, or any arm64
// CPU: NEON).
func GEMM() bool {
	return (runtime.GOARCH == "arm64" || C.tl_cpu_isa() == isaAVX512) && C.tl_gemm_ok() != 0
}

// DotTileCols is the most columns (rows of b) one DotTile32 takes: its
// slice of b stays in L2 while a's rows stream past it.
const DotTileCols = int(C.TL_GEMM_NC)

// dotPanelRows is the rows of a per packed panel.
const dotPanelRows = int(C.TL_GEMM_MR)

// DotPack holds a block of rows packed for DotTile32: each row's values
// once, in the order the matrix product reads them, shared by every
// tile of the block (and every core computing one).
type DotPack struct {
	buf  []float32 // 64-byte aligned
	m, d int       // rows packed, values per row
	max  int       // rows it can hold
	mu   []float32 // SetShift's d values, or nil
}

// NewDotPack returns a DotPack for up to m rows of d values.
func NewDotPack(m, d int) *DotPack {
	if m < 1 || d < 1 {
		panic("cpukern: NewDotPack needs m ≥ 1 and d ≥ 1")
	}
	return &DotPack{buf: aligned(DotPanels(m) * dotPanelRows * d), d: d, max: m}
}

// DotPackBytes is the memory a DotPack for m rows of d values holds.
func DotPackBytes(m, d int) int64 { return int64(DotPanels(m)*dotPanelRows)*int64(d)*4 + 64 }

// Fits reports whether the pack holds m rows of d values.
func (p *DotPack) Fits(m, d int) bool { return m <= p.max && d == p.d }

// DotPanels is the number of panels m rows are packed in; Pack packs them
// by panel.
func DotPanels(m int) int { return (m + dotPanelRows - 1) / dotPanelRows }

// SetRows makes the pack hold m rows (up to the m of NewDotPack); Pack
// then fills its panels.
func (p *DotPack) SetRows(m int) {
	if m < 1 || m > p.max {
		panic("cpukern: DotPack rows out of range")
	}
	p.m = m
}

// SetShift makes Pack and DotTile32 subtract mu (d values) from every row
// they read, each value x_k − mu_k rounded to float32 once as it is packed,
// so that the tiles hold the dot products of the rows shifted by mu: no
// pass over the rows of its own. A nil mu packs the rows as they are (the
// default). Set it before Pack; the tiles of a pack must use its mu.
func (p *DotPack) SetShift(mu []float32) {
	if mu != nil && len(mu) != p.d {
		panic("cpukern: DotPack shift of the wrong length")
	}
	p.mu = mu
}

// Pack packs panels [p0, p1) of the pack's m rows, read from a (row i at
// a[i·lda:], d values; less SetShift's mu), and reports whether every
// value it packed is finite (no NaN, no ±Inf). Disjoint panel ranges may
// be packed concurrently. Only where GEMM reports true; elsewhere it
// panics.
func (p *DotPack) Pack(a []float32, lda, p0, p1 int) (finite bool) {
	if p0 < 0 || p1 > DotPanels(p.m) || p0 > p1 {
		panic("cpukern: DotPack panels out of range")
	}
	if p0 == p1 {
		return true
	}
	checkRows(p.m, p.d, len(a), lda, "a")
	switch C.tl_gemm_pack_a(C.int64_t(p.m), C.int64_t(p.d), (*C.float)(&a[0]), C.int64_t(lda), p.shift(), C.int64_t(p0),
		C.int64_t(p1), (*C.float)(&p.buf[0])) {
	case 0:
		return true
	case 1:
		return false
	}
	panic("cpukern: DotPack without the packed matrix product")
}

// shift is SetShift's mu for C, or NULL.
func (p *DotPack) shift() *C.float {
	if p.mu == nil {
		return nil
	}
	return (*C.float)(&p.mu[0])
}

// DotScratch is one core's buffer for DotTile32's slice of b.
type DotScratch struct {
	buf     []float32
	cols, d int // the widest tile and the d it serves
}

// NewDotScratch returns a DotScratch for tiles of up to cols columns
// (at most DotTileCols) of d values.
func NewDotScratch(cols, d int) *DotScratch {
	cols = min(max(cols, 1), DotTileCols)
	return &DotScratch{aligned(DotScratchLen(cols, d)), cols, d}
}

// Fits reports whether the scratch serves tiles of cols columns of d
// values.
func (s *DotScratch) Fits(cols, d int) bool { return cols <= s.cols && d == s.d }

// DotScratchLen is the floats a DotScratch for tiles of up to cols
// columns of d values holds: a slice of k of whole panels of b.
func DotScratchLen(cols, d int) int {
	const nr, kc = int(C.TL_GEMM_NR), int(C.TL_GEMM_KC)
	return (min(cols, DotTileCols) + nr - 1) / nr * nr * min(d, kc)
}

// DotTile32 sets out[i·ldo+j] to the dot product of row i of the pack and
// b[j·ldb:] (the pack's d values, less the pack's SetShift mu, as its
// rows) for i < m (at most the pack's rows), j < n (at most the scratch's
// cols), with s its buffer. With lower ≥ 0 it computes and
// writes only the pairs with j+lower ≥ i, the upper triangle of a
// symmetric product whose columns start lower rows after its rows, and
// leaves the rest of out as it was; with lower < 0, every pair. A pair's
// value is PairDist32's (Dot), bit for bit, wherever it sits. Only on
// AVX-512 or arm64 (GEMM reports it); elsewhere it panics.
func DotTile32(p *DotPack, m, n int, b []float32, ldb int, s *DotScratch, out []float32, ldo, lower int) {
	if m > p.m || n > s.cols || p.d != s.d {
		panic("cpukern: DotTile32 tile larger than its pack or scratch")
	}
	rows := m
	if lower >= 0 {
		rows = min(m, n+lower) // rows with a pair
	}
	if rows <= 0 || n <= 0 {
		return
	}
	checkRows(n, p.d, len(b), ldb, "b")
	checkRows(rows, n, len(out), ldo, "out")
	if C.tl_gemm_tile(C.int64_t(p.m), C.int64_t(rows), C.int64_t(p.d), (*C.float)(&p.buf[0]), (*C.float)(&b[0]),
		C.int64_t(ldb), p.shift(), C.int64_t(n), (*C.float)(&s.buf[0]), (*C.float)(&out[0]), C.int64_t(ldo),
		C.int64_t(lower)) != 0 {
		panic("cpukern: DotTile32 without the packed matrix product")
	}
}

// MirrorUpper32 copies the pairs of a DotTile32 output strictly above its
// shifted diagonal to their mirror images: t[j·ldt+i] = out[i·ldo+j] for
// i < m, j < n with j+lower > i (lower ≥ 0); t's other elements are left
// as they were. Only where GEMM reports true; elsewhere it panics.
func MirrorUpper32(m, n int, out []float32, ldo, lower int, t []float32, ldt int) {
	if lower < 0 {
		panic("cpukern: MirrorUpper32 with lower < 0")
	}
	rows := min(m, n-1+lower) // rows with a pair above the diagonal
	if rows <= 0 || n <= 0 {
		return
	}
	checkRows(rows, n, len(out), ldo, "out")
	checkRows(n, rows, len(t), ldt, "t")
	if C.tl_gemm_mirror(C.int64_t(rows), C.int64_t(n), (*C.float)(&out[0]), C.int64_t(ldo), C.int64_t(lower),
		(*C.float)(&t[0]), C.int64_t(ldt)) != 0 {
		panic("cpukern: MirrorUpper32 without the packed matrix product")
	}
}

// checkRows panics, as BLAS does, unless a slice of length l holds m rows
// of n values at stride ld.
func checkRows(m, n, l, ld int, name string) {
	if m > 0 && n > 0 && (ld < n || l < (m-1)*ld+n) {
		panic("cpukern: short " + name)
	}
}

// aligned returns n floats starting on a 64-byte boundary.
func aligned(n int) []float32 {
	b := make([]float32, n+16)
	off := int(uintptr(unsafe.Pointer(&b[0]))%64) / 4
	if off > 0 {
		off = 16 - off
	}
	return b[off : off+n : off+n]
}

// fmaLoop runs n rounds of independent fused multiply-adds on one core,
// 768 flops a round (AVX-512: 24 of 16 lanes; arm64: 96 of 4 lanes): the
// core's peak rate, for benchmarks (where GEMM runs; elsewhere it returns
// at once).
func fmaLoop(n int) { C.tl_fma_loop(C.int64_t(n)) }
