package cpukern

// The gradients of the cubic interpolation kernels (interp_grad.c): with
// respect to each query and to the interpolants' values, for the values,
// the sum of squares and the sum of a query's M values.

// #include "interp_grad.h"
import "C"

import "unsafe"

// GradMode says what the forward computed per query, and so what the
// upstream gradient holds.
type GradMode int

// The forwards whose gradients the kernels compute.
const (
	GradValues GradMode = C.TL_GRAD_VALUES // all M values: upstream (n, M)
	GradSumSq  GradMode = C.TL_GRAD_SUMSQ  // Σ_j v_j²: upstream (n,)
	GradSum    GradMode = C.TL_GRAD_SUM    // Σ_j v_j: upstream (n,)
)

// upLen is the upstream gradient's length for n queries of m values.
func (mode GradMode) upLen(n, m int) int {
	if mode == GradValues {
		return n * m
	}
	return n
}

// InterpGradX sets dst[i] to the derivative, with respect to the query
// x[i], of Σ_j c_ij·v_j(x[i]): the derivative of the forward's output
// times the upstream gradient up. v_j is interpolant j of fpT, the (G+2, m)
// table of the padded values (InterpValues), and c_ij is up[i·m+j]
// (GradValues), 2·up[i]·v_j (GradSumSq) or up[i] (GradSum). v_j' is
// Σ_k w_k'(t)/Dx·fpT[(s+k)·m + j], zero for a query outside [A, Ub) (the
// forward clamps it there: the derivative is the one from the right, as
// the forward takes the cell on the right of a node, and at Ub too).
// Computed in float64.
func InterpGradX[T float32 | float64](dst, x, up []T, grid CubicGrid, fpT []T, m int, mode GradMode) {
	checkInterp(len(dst), len(x), 1, grid)
	if len(fpT) < (grid.G+2)*m {
		panic("cpukern: InterpGradX: short fpT")
	}
	if len(up) < mode.upLen(len(x), m) {
		panic("cpukern: InterpGradX: short upstream")
	}
	if len(x) == 0 {
		return
	}
	n, g, a, dx, ub, mm, md := C.int64_t(len(x)), C.int64_t(grid.G), C.double(grid.A), C.double(grid.Dx), C.double(grid.Ub), C.int64_t(m), C.int(mode)
	switch x := any(x).(type) {
	case []float32:
		C.tl_interp_grad_x_f32(n, (*C.float)(&x[0]), (*C.float)(unsafe.Pointer(&up[0])), (*C.float)(unsafe.Pointer(&dst[0])),
			g, a, dx, ub, (*C.float)(unsafe.Pointer(&fpT[0])), mm, md)
	case []float64:
		C.tl_interp_grad_x_f64(n, (*C.double)(&x[0]), (*C.double)(unsafe.Pointer(&up[0])), (*C.double)(unsafe.Pointer(&dst[0])),
			g, a, dx, ub, (*C.double)(unsafe.Pointer(&fpT[0])), mm, md)
	}
}

// InterpGradXGram is InterpGradX for GradSumSq from the per-cell Gram
// entries (InterpGram): dst[i] = 2·up[i]·wᵀ·Gram_s·w'.
func InterpGradXGram[T float32 | float64](dst, x, up []T, grid CubicGrid, gram []float64) {
	checkInterp(len(dst), len(x), 1, grid)
	if len(gram) < 10*(grid.G-1) {
		panic("cpukern: InterpGradXGram: short gram")
	}
	if len(up) < len(x) {
		panic("cpukern: InterpGradXGram: short upstream")
	}
	if len(x) == 0 {
		return
	}
	n, g, a, dx, ub, p := C.int64_t(len(x)), C.int64_t(grid.G), C.double(grid.A), C.double(grid.Dx), C.double(grid.Ub), (*C.double)(&gram[0])
	switch x := any(x).(type) {
	case []float32:
		C.tl_interp_grad_x_gram_f32(n, (*C.float)(&x[0]), (*C.float)(unsafe.Pointer(&up[0])), (*C.float)(unsafe.Pointer(&dst[0])), g, a, dx, ub, p)
	case []float64:
		C.tl_interp_grad_x_gram_f64(n, (*C.double)(&x[0]), (*C.double)(unsafe.Pointer(&up[0])), (*C.double)(unsafe.Pointer(&dst[0])), g, a, dx, ub, p)
	}
}

// InterpGradXColSum is InterpGradX for GradSum from the column sums
// (InterpColSum): dst[i] = up[i]·Σ_k w_k'·colsum[s+k].
func InterpGradXColSum[T float32 | float64](dst, x, up []T, grid CubicGrid, colsum []float64) {
	checkInterp(len(dst), len(x), 1, grid)
	if len(colsum) < grid.G+2 {
		panic("cpukern: InterpGradXColSum: short colsum")
	}
	if len(up) < len(x) {
		panic("cpukern: InterpGradXColSum: short upstream")
	}
	if len(x) == 0 {
		return
	}
	n, g, a, dx, ub, p := C.int64_t(len(x)), C.int64_t(grid.G), C.double(grid.A), C.double(grid.Dx), C.double(grid.Ub), (*C.double)(&colsum[0])
	switch x := any(x).(type) {
	case []float32:
		C.tl_interp_grad_x_colsum_f32(n, (*C.float)(&x[0]), (*C.float)(unsafe.Pointer(&up[0])), (*C.float)(unsafe.Pointer(&dst[0])), g, a, dx, ub, p)
	case []float64:
		C.tl_interp_grad_x_colsum_f64(n, (*C.double)(&x[0]), (*C.double)(unsafe.Pointer(&up[0])), (*C.double)(unsafe.Pointer(&dst[0])), g, a, dx, ub, p)
	}
}

// InterpGradF adds to acc, the (G+2, m) gradient of the padded values in
// the layout of fpT, the transpose of the interpolation weights applied to
// the upstream gradient: acc[(s+k)·m + j] += w_k·c_ij (c_ij as in
// InterpGradX), for the interpolants j in [jlo, jhi) only, over the
// queries in order. Each element is so summed in one order whatever range
// a call takes: calls on disjoint ranges may run at once, and the result
// does not depend on how the interpolants are split among them. fpT is
// read for GradSumSq only (nil otherwise).
func InterpGradF[T float32 | float64](acc []float64, x, up []T, grid CubicGrid, fpT []T, m int, mode GradMode, jlo, jhi int) {
	checkInterp(0, 0, 1, grid)
	switch {
	case len(acc) < (grid.G+2)*m:
		panic("cpukern: InterpGradF: short acc")
	case mode == GradSumSq && len(fpT) < (grid.G+2)*m:
		panic("cpukern: InterpGradF: short fpT")
	case len(up) < mode.upLen(len(x), m):
		panic("cpukern: InterpGradF: short upstream")
	case jlo < 0 || jhi > m || jlo > jhi:
		panic("cpukern: InterpGradF: interpolant range out of bounds")
	}
	if len(x) == 0 || jlo == jhi {
		return
	}
	var p unsafe.Pointer
	if mode == GradSumSq {
		p = unsafe.Pointer(&fpT[0])
	}
	n, g, a, dx, ub, mm, md := C.int64_t(len(x)), C.int64_t(grid.G), C.double(grid.A), C.double(grid.Dx), C.double(grid.Ub), C.int64_t(m), C.int(mode)
	switch x := any(x).(type) {
	case []float32:
		C.tl_interp_grad_f_f32(n, (*C.float)(&x[0]), (*C.float)(unsafe.Pointer(&up[0])), (*C.double)(&acc[0]),
			g, a, dx, ub, (*C.float)(p), mm, md, C.int64_t(jlo), C.int64_t(jhi))
	case []float64:
		C.tl_interp_grad_f_f64(n, (*C.double)(&x[0]), (*C.double)(unsafe.Pointer(&up[0])), (*C.double)(&acc[0]),
			g, a, dx, ub, (*C.double)(p), mm, md, C.int64_t(jlo), C.int64_t(jhi))
	}
}
