// Sums and maxima in a fixed order, see stats.c.
#ifndef TAPELOOP_STATS_H
#define TAPELOOP_STATS_H
#include <stdint.h>

typedef struct {
    double sum, max;
} tl_sum_max;

// tl_sum_max_f32 and _f64 return the sum of x[0..n) in double as eight
// interleaved partial sums (x[i] into s[i mod 8]), added as
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), and the largest x[i]
// (-inf when n is 0; NaNs are passed over).
tl_sum_max tl_sum_max_f32(const float *x, int64_t n);
tl_sum_max tl_sum_max_f64(const double *x, int64_t n);

#endif
