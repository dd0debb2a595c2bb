// Gradients of the cubic interpolation of interp.h, see interp_grad.c.
#ifndef TAPELOOP_INTERP_GRAD_H
#define TAPELOOP_INTERP_GRAD_H
#include <stdint.h>

// What the forward computed for each query, and so what the upstream
// gradient up holds: TL_GRAD_VALUES all m values (up is (n, m)),
// TL_GRAD_SUMSQ sum_j v_j^2 and TL_GRAD_SUM sum_j v_j (up is (n,)).
enum { TL_GRAD_VALUES = 0, TL_GRAD_SUMSQ = 1, TL_GRAD_SUM = 2 };

// The queries are placed as in interp.h: s, t and w_k(t); dw_k is the
// derivative of w_k with respect to the query, w_k'(t)/dx, zero where the
// query is clamped (x < a or x >= ub: the derivative from the right, as
// the forward takes the cell on the right of a node).
//
// grad_x:     out[i] = sum_j c_ij * sum_k dw_k fpT[(s+k)*m + j], with
//             c_ij = up[i*m+j] (VALUES), 2 up[i] v_ij (SUMSQ), up[i] (SUM).
// grad_x_gram:   out[i] = 2 up[i] * w^T Gram_s dw (gram as in interp.h).
// grad_x_colsum: out[i] = up[i] * sum_k dw_k colsum[s+k].
// grad_f:     acc[(s+k)*m + j] += w_k c_ij for the interpolants
//             jlo <= j < jhi, queries in order: each sum has the same
//             order whatever the range of interpolants a call takes.
// All in double; fpT and up are in the element type.
void tl_interp_grad_x_f32(int64_t n, const float *x, const float *up, float *out, int64_t g, double a, double dx,
                          double ub, const float *fpT, int64_t m, int mode);
void tl_interp_grad_x_f64(int64_t n, const double *x, const double *up, double *out, int64_t g, double a, double dx,
                          double ub, const double *fpT, int64_t m, int mode);
void tl_interp_grad_x_gram_f32(int64_t n, const float *x, const float *up, float *out, int64_t g, double a,
                               double dx, double ub, const double *gram);
void tl_interp_grad_x_gram_f64(int64_t n, const double *x, const double *up, double *out, int64_t g, double a,
                               double dx, double ub, const double *gram);
void tl_interp_grad_x_colsum_f32(int64_t n, const float *x, const float *up, float *out, int64_t g, double a,
                                 double dx, double ub, const double *colsum);
void tl_interp_grad_x_colsum_f64(int64_t n, const double *x, const double *up, double *out, int64_t g, double a,
                                 double dx, double ub, const double *colsum);
void tl_interp_grad_f_f32(int64_t n, const float *x, const float *up, double *acc, int64_t g, double a, double dx,
                          double ub, const float *fpT, int64_t m, int mode, int64_t jlo, int64_t jhi);
void tl_interp_grad_f_f64(int64_t n, const double *x, const double *up, double *acc, int64_t g, double a, double dx,
                          double ub, const double *fpT, int64_t m, int mode, int64_t jlo, int64_t jhi);
#endif
