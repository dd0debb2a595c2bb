// Separable 2-D filters of a batch of images, see filter.c.
#ifndef TAPELOOP_FILTER_H
#define TAPELOOP_FILTER_H
#include <stdint.h>

// The boundaries: TL_FILTER_REFLECT extends a line by half-sample symmetric
// reflection (d c b a | a b c d | d c b a, scipy.ndimage's mode='reflect'),
// repeated as often as a long kernel needs; TL_FILTER_NEAREST repeats the
// edge value (a a a | a b c d | d d d, mode='nearest').
enum { TL_FILTER_REFLECT = 0, TL_FILTER_NEAREST = 1 };

// tl_filter_rows_f32 correlates each line l, lo ≤ l < hi, of n floats at
// in + l·n with the nw taps w along the line:
//   out[l·n + c] = Σ_k w[k]·in[l·n + ext(c + k − h)], k = 0 … nw−1,
// ext the boundary's index (h = nw/2 is scipy.ndimage's centre), summed in
// float in order of k from w[0]·x. in and out must not overlap.
void tl_filter_rows_f32(const float *in, float *out, int64_t n, int64_t lo, int64_t hi, const float *w, int64_t nw,
                        int64_t h, int mode);

// tl_filter_cols_f32 correlates down the columns of images of rows × cols:
// for each output row g, lo ≤ g < hi (image g / rows, row r = g % rows),
//   out[g·cols + c] = Σ_k w[k]·in[(image·rows + ext(r + k − h))·cols + c],
// summed as tl_filter_rows_f32 sums. in and out must not overlap.
void tl_filter_cols_f32(const float *in, float *out, int64_t rows, int64_t cols, int64_t lo, int64_t hi, const float *w,
                        int64_t nw, int64_t h, int mode);
#endif
