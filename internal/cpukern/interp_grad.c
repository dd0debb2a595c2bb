// Gradients of the cubic interpolation of interp.c with respect to the
// queries and to the interpolants' values, in double, one query at a time
// (the loops over the interpolants are left to the compiler's vectorizer).
//
// A query is placed as the forward places it: clamp, floor of the
// correctly rounded xc/dx, t, the start s and the weights w_k(t). The
// derivative of the value with respect to the query is then
// sum_k w_k'(t)/dx times the padded values at s+k, where the query is not
// clamped (a <= x < ub); a clamped query's value does not move with it.
#include "interp_grad.h"
#include <math.h>
#include <stdint.h>

static const double ga[4] = {-1.0 / 16, 9.0 / 16, 9.0 / 16, -1.0 / 16};
static const double gb[4] = {1.0 / 24, -9.0 / 8, 9.0 / 8, -1.0 / 24};
static const double gc[4] = {1.0 / 4, -1.0 / 4, -1.0 / 4, 1.0 / 4};
static const double gd[4] = {-1.0 / 6, 1.0 / 2, -1.0 / 2, 1.0 / 6};

// place sets w and dw for query x and returns its start s. The derivative
// is the one from the right, as the forward takes the cell on the right of
// a node: zero at the upper bound too, where the forward is constant to
// the right.
static inline int64_t place(double x, int64_t g, double a, double dx, double ub, double w[4], double dw[4]) {
  double live = 1 / dx;
  if (x < a) {
    x = a, live = 0;
  } else if (x >= ub) {
    x = ub, live = 0;
  }
  const double u = (x - a) / dx, fi = floor(u), t = u - (fi + 0.5);
  int64_t s = (int64_t)fi;
  if (s < 0 || fi != fi)
    s = 0;
  else if (s > g - 2)
    s = g - 2;
  for (int k = 0; k < 4; k++) {
    w[k] = ga[k] + t * (gb[k] + t * (gc[k] + t * gd[k]));
    dw[k] = (gb[k] + t * (2 * gc[k] + t * 3 * gd[k])) * live;
  }
  return s;
}

#define GRAD_X(TS, T)                                                                                                \
  void tl_interp_grad_x_##TS(int64_t n, const T *x, const T *up, T *out, int64_t g, double a, double dx, double ub, \
                             const T *fpT, int64_t m, int mode) {                                                    \
    for (int64_t i = 0; i < n; i++) {                                                                                \
      double w[4], dw[4];                                                                                            \
      const int64_t s = place(x[i], g, a, dx, ub, w, dw);                                                            \
      const T *r0 = fpT + s * m, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;                                           \
      double acc = 0;                                                                                                \
      if (mode == TL_GRAD_VALUES) {                                                                                  \
        const T *u = up + i * m;                                                                                     \
        for (int64_t j = 0; j < m; j++)                                                                              \
          acc += (double)u[j] * (dw[0] * r0[j] + dw[1] * r1[j] + dw[2] * r2[j] + dw[3] * r3[j]);                     \
        out[i] = (T)acc;                                                                                             \
      } else if (mode == TL_GRAD_SUMSQ) {                                                                            \
        for (int64_t j = 0; j < m; j++) {                                                                            \
          const double v = w[0] * r0[j] + w[1] * r1[j] + w[2] * r2[j] + w[3] * r3[j];                                \
          acc += v * (dw[0] * r0[j] + dw[1] * r1[j] + dw[2] * r2[j] + dw[3] * r3[j]);                                \
        }                                                                                                            \
        out[i] = (T)(2 * (double)up[i] * acc);                                                                       \
      } else {                                                                                                       \
        for (int64_t j = 0; j < m; j++) acc += dw[0] * r0[j] + dw[1] * r1[j] + dw[2] * r2[j] + dw[3] * r3[j];        \
        out[i] = (T)((double)up[i] * acc);                                                                           \
      }                                                                                                              \
    }                                                                                                                \
  }                                                                                                                  \
  void tl_interp_grad_x_gram_##TS(int64_t n, const T *x, const T *up, T *out, int64_t g, double a, double dx,       \
                                  double ub, const double *gram) {                                                   \
    for (int64_t i = 0; i < n; i++) {                                                                                \
      double w[4], dw[4];                                                                                            \
      const double *e = gram + 10 * place(x[i], g, a, dx, ub, w, dw);                                                \
      /* the symmetric Gram matrix times dw, then w^T of that */                                                     \
      const double r0 = e[0] * dw[0] + e[1] * dw[1] + e[2] * dw[2] + e[3] * dw[3];                                   \
      const double r1 = e[1] * dw[0] + e[4] * dw[1] + e[5] * dw[2] + e[6] * dw[3];                                   \
      const double r2 = e[2] * dw[0] + e[5] * dw[1] + e[7] * dw[2] + e[8] * dw[3];                                   \
      const double r3 = e[3] * dw[0] + e[6] * dw[1] + e[8] * dw[2] + e[9] * dw[3];                                   \
      out[i] = (T)(2 * (double)up[i] * (w[0] * r0 + w[1] * r1 + w[2] * r2 + w[3] * r3));                             \
    }                                                                                                                \
  }                                                                                                                  \
  void tl_interp_grad_x_colsum_##TS(int64_t n, const T *x, const T *up, T *out, int64_t g, double a, double dx,     \
                                    double ub, const double *colsum) {                                               \
    for (int64_t i = 0; i < n; i++) {                                                                                \
      double w[4], dw[4];                                                                                            \
      const double *c = colsum + place(x[i], g, a, dx, ub, w, dw);                                                   \
      out[i] = (T)((double)up[i] * (dw[0] * c[0] + dw[1] * c[1] + dw[2] * c[2] + dw[3] * c[3]));                     \
    }                                                                                                                \
  }                                                                                                                  \
  void tl_interp_grad_f_##TS(int64_t n, const T *x, const T *up, double *acc, int64_t g, double a, double dx,       \
                             double ub, const T *fpT, int64_t m, int mode, int64_t jlo, int64_t jhi) {               \
    for (int64_t i = 0; i < n; i++) {                                                                                \
      double w[4], dw[4];                                                                                            \
      const int64_t s = place(x[i], g, a, dx, ub, w, dw);                                                            \
      double *a0 = acc + s * m, *a1 = a0 + m, *a2 = a1 + m, *a3 = a2 + m;                                            \
      if (mode == TL_GRAD_VALUES) {                                                                                  \
        const T *u = up + i * m;                                                                                     \
        for (int64_t j = jlo; j < jhi; j++) {                                                                        \
          const double c = u[j];                                                                                     \
          a0[j] += w[0] * c, a1[j] += w[1] * c, a2[j] += w[2] * c, a3[j] += w[3] * c;                                \
        }                                                                                                            \
      } else if (mode == TL_GRAD_SUMSQ) {                                                                            \
        const T *r0 = fpT + s * m, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;                                         \
        const double u2 = 2 * (double)up[i];                                                                         \
        for (int64_t j = jlo; j < jhi; j++) {                                                                        \
          const double c = u2 * (w[0] * r0[j] + w[1] * r1[j] + w[2] * r2[j] + w[3] * r3[j]);                         \
          a0[j] += w[0] * c, a1[j] += w[1] * c, a2[j] += w[2] * c, a3[j] += w[3] * c;                                \
        }                                                                                                            \
      } else {                                                                                                       \
        const double c = up[i];                                                                                      \
        for (int64_t j = jlo; j < jhi; j++) a0[j] += w[0] * c, a1[j] += w[1] * c, a2[j] += w[2] * c, a3[j] += w[3] * c; \
      }                                                                                                              \
    }                                                                                                                \
  }

GRAD_X(f32, float)
GRAD_X(f64, double)
