package cpukern

// The separable filter passes of filter.c, behind ops.Filter2D.

// #include "filter.h"
import "C"

// FilterMode is how a filter pass extends a line past its ends.
type FilterMode int

const (
	// FilterReflect is half-sample symmetric reflection, d c b a | a b c d
	// | d c b a (scipy.ndimage's mode='reflect'), repeated as often as a
	// long kernel needs.
	FilterReflect FilterMode = C.TL_FILTER_REFLECT
	// FilterNearest repeats the edge value, a a a | a b c d | d d d
	// (mode='nearest').
	FilterNearest FilterMode = C.TL_FILTER_NEAREST
)

// FilterRows correlates lines lo … hi−1 of n values of src with the taps w
// into the same lines of dst: dst[l·n + c] = Σ_k w[k]·src[l·n + ext(c + k
// − len(w)/2)], ext the mode's index, summed in float32 in the order of k
// from w[0]·x (scipy.ndimage.correlate1d with origin 0, in float32). src
// and dst must not overlap.
func FilterRows(dst, src []float32, n, lo, hi int, w []float32, mode FilterMode) {
	if n < 1 || lo < 0 || hi > len(src)/n || hi > len(dst)/n || len(w) == 0 {
		panic("cpukern: FilterRows: lines outside the buffers, or no taps")
	}
	if lo >= hi {
		return
	}
	C.tl_filter_rows_f32((*C.float)(&src[0]), (*C.float)(&dst[0]), C.int64_t(n), C.int64_t(lo), C.int64_t(hi),
		(*C.float)(&w[0]), C.int64_t(len(w)), C.int64_t(len(w)/2), C.int(mode))
}

// FilterCols correlates down the columns of images of rows × cols values:
// output rows lo … hi−1 of the batch (row g is row g % rows of image
// g / rows), dst[g·cols + c] = Σ_k w[k]·src[(image·rows + ext(r + k −
// len(w)/2))·cols + c], summed as FilterRows sums. src and dst must not
// overlap.
func FilterCols(dst, src []float32, rows, cols, lo, hi int, w []float32, mode FilterMode) {
	if rows < 1 || cols < 1 || lo < 0 || hi > len(src)/cols || hi > len(dst)/cols || len(w) == 0 ||
		hi > 0 && (hi+rows-1)/rows*rows*cols > len(src) {
		panic("cpukern: FilterCols: rows outside the buffers, or no taps")
	}
	if lo >= hi {
		return
	}
	C.tl_filter_cols_f32((*C.float)(&src[0]), (*C.float)(&dst[0]), C.int64_t(rows), C.int64_t(cols), C.int64_t(lo),
		C.int64_t(hi), (*C.float)(&w[0]), C.int64_t(len(w)), C.int64_t(len(w)/2), C.int(mode))
}
