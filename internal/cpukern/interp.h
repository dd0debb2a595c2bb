// Cubic interpolation on a shared uniform grid, see interp.c.
#ifndef TAPELOOP_INTERP_H
#define TAPELOOP_INTERP_H
#include <stdint.h>

// The grid: g points from a, dx apart; queries are clamped to [a, ub].
// For a query x: xc = clamp(x, a, ub) - a, ix = floor(xc/dx),
// t = xc/dx - (ix + 1/2), start s = clamp(ix, 0, g-2), weights
// w_k = A_k + t*(B_k + t*(C_k + t*D_k)), all in double.
//
// gram:   out[i] = sum_kl w_k w_l G_s[k][l], G_s the 10 entries
//         g00 g01 g02 g03 g11 g12 g13 g22 g23 g33 at gram[10*s].
// colsum: out[i] = sum_k w_k colsum[s+k].
// values: out[i*m + j] = sum_k w_k fpT[(s+k)*m + j] (in the element type);
//         stream: write with non-temporal stores only (outputs far larger
//         than the caches).
// reduce: out[i] = sum_j v_j^2 (sumsq) or sum_j v_j, v_j as in values,
//         summed in double.
// values and reduce visit the queries in the order of their cells when
// the table of values is large (tl_interp_sort_bytes); the results do not
// depend on the order.
void tl_interp_gram_f32(int64_t n, const float *x, float *out, int64_t g, double a, double dx, double ub,
                        const double *gram);
void tl_interp_gram_f64(int64_t n, const double *x, double *out, int64_t g, double a, double dx, double ub,
                        const double *gram);
void tl_interp_colsum_f32(int64_t n, const float *x, float *out, int64_t g, double a, double dx, double ub,
                          const double *colsum);
void tl_interp_colsum_f64(int64_t n, const double *x, double *out, int64_t g, double a, double dx, double ub,
                          const double *colsum);
void tl_interp_values_f32(int64_t n, const float *x, float *out, int64_t g, double a, double dx, double ub,
                          const float *fpT, int64_t m, int stream);
void tl_interp_values_f64(int64_t n, const double *x, double *out, int64_t g, double a, double dx, double ub,
                          const double *fpT, int64_t m, int stream);
void tl_interp_reduce_f32(int64_t n, const float *x, float *out, int64_t g, double a, double dx, double ub,
                          const float *fpT, int64_t m, int sumsq);
void tl_interp_reduce_f64(int64_t n, const double *x, double *out, int64_t g, double a, double dx, double ub,
                          const double *fpT, int64_t m, int sumsq);
// tl_interp_sort_bytes sets the size of a table of values above which the
// values and reduce kernels sort their queries by cell (for tests; not
// while kernels run) and returns the one before.
int64_t tl_interp_sort_bytes(int64_t b);
#endif
