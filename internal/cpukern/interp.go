package cpukern

// The cubic interpolation kernels of interp.c: M interpolants on a shared
// uniform grid, evaluated at a batch of queries and reduced per query,
// behind ops.Interp1D. Each places its queries in vectors of doubles
// (clamp, floor, cell, the four cubic weights, in float64 as
// ops.InterpTable defines them) and then either reads a per-cell table
// (InterpGram, InterpColSum: no per-interpolant work) or goes along the M
// interpolants (InterpValues, InterpReduce).

// #include "interp.h"
import "C"

import "unsafe"

// CubicGrid is the grid of the interpolants, a + i·dx for i = 0…G−1, and
// how a query x is placed on it: xc = clamp(x, A, Ub) − A, ix = ⌊xc/Dx⌋,
// t = xc/Dx − (ix + ½), start s = clamp(ix, 0, G−2), and weights
// w_k = a_k + t·(b_k + t·(c_k + t·d_k)), k = 0…3, with the cubic weight
// polynomials of ops.InterpTable; all in float64. A NaN query gets s = 0
// and NaN weights. The kernels' results agree with plain float64 loops
// over these definitions to within rounding: they fuse multiplies and
// adds, divide by a product with 1/Dx and an exact correction (correctly
// rounded, as xc/Dx), and evaluate the weights as even and odd parts in t.
type CubicGrid struct {
	G     int     // grid points, at least 4
	A, Dx float64 // origin and spacing (> 0)
	Ub    float64 // the largest query, A + (G+1)·Dx for ops.InterpTable
}

// InterpGram sets dst[i], for each query x[i], to wᵀ·Gram_s·w: the sum of
// squares of the interpolated values, from gram, which holds for each start
// s < G−1 the 10 distinct entries of the 4×4 Gram matrix of the padded
// values at s…s+3 (g00 g01 g02 g03 g11 g12 g13 g22 g23 g33 at 10·s).
func InterpGram[T float32 | float64](dst, x []T, grid CubicGrid, gram []float64) {
	checkInterp(len(dst), len(x), 1, grid)
	if len(gram) < 10*(grid.G-1) {
		panic("cpukern: InterpGram: short gram")
	}
	if len(x) == 0 {
		return
	}
	n, g, a, dx, ub, p := C.int64_t(len(x)), C.int64_t(grid.G), C.double(grid.A), C.double(grid.Dx), C.double(grid.Ub), (*C.double)(&gram[0])
	switch x := any(x).(type) {
	case []float32:
		C.tl_interp_gram_f32(n, (*C.float)(&x[0]), (*C.float)(unsafe.Pointer(&dst[0])), g, a, dx, ub, p)
	case []float64:
		C.tl_interp_gram_f64(n, (*C.double)(&x[0]), (*C.double)(unsafe.Pointer(&dst[0])), g, a, dx, ub, p)
	}
}

// InterpColSum sets dst[i], for each query x[i], to Σ_k w_k·colsum[s+k]:
// the sum of the interpolated values, from colsum, which holds the sum of
// the interpolants' padded values at each of the G+2 points.
func InterpColSum[T float32 | float64](dst, x []T, grid CubicGrid, colsum []float64) {
	checkInterp(len(dst), len(x), 1, grid)
	if len(colsum) < grid.G+2 {
		panic("cpukern: InterpColSum: short colsum")
	}
	if len(x) == 0 {
		return
	}
	n, g, a, dx, ub, p := C.int64_t(len(x)), C.int64_t(grid.G), C.double(grid.A), C.double(grid.Dx), C.double(grid.Ub), (*C.double)(&colsum[0])
	switch x := any(x).(type) {
	case []float32:
		C.tl_interp_colsum_f32(n, (*C.float)(&x[0]), (*C.float)(unsafe.Pointer(&dst[0])), g, a, dx, ub, p)
	case []float64:
		C.tl_interp_colsum_f64(n, (*C.double)(&x[0]), (*C.double)(unsafe.Pointer(&dst[0])), g, a, dx, ub, p)
	}
}

// InterpValues sets the row dst[i·m : (i+1)·m], for each query x[i], to
// the values of the m interpolants: value j is Σ_k w_k·fpT[(s+k)·m + j],
// computed in T, from fpT, the (G+2, m) table of the padded values. With
// stream it writes with non-temporal stores, which skip the caches: for
// outputs far larger than the last-level cache, which then cost one pass
// over memory rather than two; the values are the same either way.
func InterpValues[T float32 | float64](dst, x []T, grid CubicGrid, fpT []T, m int, stream bool) {
	checkInterp(len(dst), len(x), m, grid)
	if len(fpT) < (grid.G+2)*m {
		panic("cpukern: InterpValues: short fpT")
	}
	if len(x) == 0 {
		return
	}
	n, g, a, dx, ub, mm, st := C.int64_t(len(x)), C.int64_t(grid.G), C.double(grid.A), C.double(grid.Dx), C.double(grid.Ub), C.int64_t(m), C.int(0)
	if stream {
		st = 1
	}
	switch x := any(x).(type) {
	case []float32:
		C.tl_interp_values_f32(n, (*C.float)(&x[0]), (*C.float)(unsafe.Pointer(&dst[0])), g, a, dx, ub,
			(*C.float)(unsafe.Pointer(&fpT[0])), mm, st)
	case []float64:
		C.tl_interp_values_f64(n, (*C.double)(&x[0]), (*C.double)(unsafe.Pointer(&dst[0])), g, a, dx, ub,
			(*C.double)(unsafe.Pointer(&fpT[0])), mm, st)
	}
}

// InterpReduce sets dst[i], for each query x[i], to the sum of squares
// (sumsq) or the sum of its m values as InterpValues computes them, summed
// in float64.
func InterpReduce[T float32 | float64](dst, x []T, grid CubicGrid, fpT []T, m int, sumsq bool) {
	checkInterp(len(dst), len(x), 1, grid)
	if m < 1 || len(fpT) < (grid.G+2)*m {
		panic("cpukern: InterpReduce: short fpT")
	}
	if len(x) == 0 {
		return
	}
	n, g, a, dx, ub, mm, sq := C.int64_t(len(x)), C.int64_t(grid.G), C.double(grid.A), C.double(grid.Dx), C.double(grid.Ub), C.int64_t(m), C.int(0)
	if sumsq {
		sq = 1
	}
	switch x := any(x).(type) {
	case []float32:
		C.tl_interp_reduce_f32(n, (*C.float)(&x[0]), (*C.float)(unsafe.Pointer(&dst[0])), g, a, dx, ub,
			(*C.float)(unsafe.Pointer(&fpT[0])), mm, sq)
	case []float64:
		C.tl_interp_reduce_f64(n, (*C.double)(&x[0]), (*C.double)(unsafe.Pointer(&dst[0])), g, a, dx, ub,
			(*C.double)(unsafe.Pointer(&fpT[0])), mm, sq)
	}
}

// interpSortBytes sets the size of a table of values above which
// InterpValues and InterpReduce sort their queries by cell, and returns the
// one before: tests reach both orders with it. Not safe while kernels run.
func interpSortBytes(b int64) int64 { return int64(C.tl_interp_sort_bytes(C.int64_t(b))) }

// checkInterp panics on a grid the kernels cannot place queries on or a
// dst shorter than n queries of per values.
func checkInterp(ld, n, per int, grid CubicGrid) {
	switch {
	case grid.G < 4:
		panic("cpukern: CubicGrid: G < 4")
	case !(grid.Dx > 0):
		panic("cpukern: CubicGrid: Dx ≤ 0")
	case per < 1:
		panic("cpukern: interp: m < 1")
	case ld < n*per:
		panic("cpukern: interp: short dst")
	}
}
