// The vectorised evaluator of users' formulas (numexpr's design): a
// program of simple instructions runs over the vector axis in chunks of
// TL_FX_CHUNK elements, each instruction over a whole chunk with GCC
// vector operators, so the cost of decoding an instruction is shared by
// the chunk and the chunk's temporaries stay in L1. Reductions fold each
// chunk into a double register. The evaluator is compiled from one
// template, formula_impl.h, for AVX-512, AVX2 and SSE2 on x86-64, where
// the widest the CPU has is chosen at run time (tl_cpu_isa, as the
// pairwise kernels do), and for the baseline alone elsewhere.
#include "formula.h"
#include "isa.h"
#include "pairdist.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

// tl_fx_mod is NumPy's mod (Python's %): fmod moved by b when it has
// the other sign, so that the result has the sign of b (package
// formula's pyMod).
static inline double tl_fx_mod(double a, double b) {
  double m = fmod(a, b);
  if (b == 0) return m;
  if (m == 0) return copysign(0.0, b);
  if ((b < 0) != (m < 0)) m += b;
  return m;
}
static inline float tl_fx_modf(float a, float b) {
  float m = fmodf(a, b);
  if (b == 0) return m;
  if (m == 0) return copysignf(0.0f, b);
  if ((b < 0) != (m < 0)) m += b;
  return m;
}

static double tl_fx_scalar(int32_t op, double a, double b, double c) {
  switch (op) {
  TL_FX_SCALAR_CASES
  case TL_FX_ABSDIFF: return fabs(a - b);
  case TL_FX_SQDIFF: return (a - b) * (a - b);
  }
  return NAN;
}

// tl_fx_bin is the bin of [lo, hi] in n equal bins that holds v, or -1
// when v is outside (or NaN), as NumPy's histogram finds it: the bin's
// edges are linspace(lo, hi, n + 1), lo + i·(hi − lo)/n and hi exactly,
// a bin holds its lower edge, and the last bin holds hi too.
static inline int64_t tl_fx_bin(double v, double lo, double hi, int64_t n) {
  if (!(v >= lo && v <= hi)) return -1;
  const double step = (hi - lo) / (double)n;
  int64_t i = (int64_t)((v - lo) * ((double)n / (hi - lo)));
  if (i >= n) i = n - 1;
  if (i < 0) i = 0;
  // The estimate is off by one at most: moved to the bin whose edges hold v.
  if (v < (double)i * step + lo) i--;
  else if (i + 1 < n && v >= (double)(i + 1) * step + lo) i++;
  return i;
}

// tl_fx_hist runs a HIST or HIST2 instruction x over nn elements of u (and
// v): see formula.h. One definition for each element type.
#define TL_FX_HIST(NAME, T)                                                                        \
  static void NAME(double *s, tl_fx_ins x, int two, int64_t nn, const T *u, const T *v) {         \
    const double lo = s[x.c], hi = s[x.c + 1];                                                     \
    const int64_t n = (int64_t)s[x.c + 2];                                                         \
    double *h = s + x.dst;                                                                         \
    for (int64_t k = 0; k < nn; k++) {                                                             \
      const int64_t i = tl_fx_bin(u[k], lo, hi, n);                                                \
      if (i < 0) continue;                                                                         \
      if (!two) {                                                                                  \
        h[i]++;                                                                                    \
        continue;                                                                                  \
      }                                                                                            \
      const int64_t j = tl_fx_bin(v[k], lo, hi, n);                                                \
      if (j >= 0) h[i * n + j]++;                                                                  \
    }                                                                                              \
  }
TL_FX_HIST(tl_fx_hist_f64, double)
TL_FX_HIST(tl_fx_hist_f32, float)
#undef TL_FX_HIST
#define tl_fx_hist(s, x, two, nn, u, v)                                                                     \
  _Generic((u), const float *: tl_fx_hist_f32, const double *: tl_fx_hist_f64)(s, x, two, nn, u, v)

// tl_fx_bins runs instruction y bin by bin, as the prefix x (BINS) says.
static void tl_fx_bins(tl_fx_ins x, tl_fx_ins y, double *s) {
  const int64_t n = x.dst;
  const int64_t sa = x.a & 1, sb = (x.a >> 1) & 1, sc = (x.a >> 2) & 1;
  switch (y.op) {
  case TL_FX_RSUM: {
    double r = 0;
    for (int64_t i = 0; i < n; i++) r += s[y.a + i];
    s[y.dst] = r;
    return;
  }
  case TL_FX_RMAX:
  case TL_FX_RMIN: { // NaN skipped, as over the vector axis
    const int mx = y.op == TL_FX_RMAX;
    double r = mx ? -INFINITY : INFINITY;
    for (int64_t i = 0; i < n; i++) {
      const double e = s[y.a + i];
      if (mx ? e > r : e < r) r = e;
    }
    s[y.dst] = r;
    return;
  }
  }
  for (int64_t i = 0; i < n; i++)
    s[y.dst + i] = tl_fx_scalar(y.op, s[y.a + sa * i], s[y.b + sb * i], s[y.c + sc * i]);
}

#define FN32(g) g##f
#define FN64(g) g

#if TL_X86
#pragma GCC push_options
#pragma GCC target("avx512f")
#define T float
#define IT int32_t
#define W 16
#define FN FN32
#define SFX(x) x##_f32_512
#include "formula_impl.h"
#undef T
#undef IT
#undef W
#undef FN
#undef SFX
#define T double
#define IT int64_t
#define W 8
#define FN FN64
#define SFX(x) x##_f64_512
#include "formula_impl.h"
#undef T
#undef IT
#undef W
#undef FN
#undef SFX
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define T float
#define IT int32_t
#define W 8
#define FN FN32
#define SFX(x) x##_f32_256
#include "formula_impl.h"
#undef T
#undef IT
#undef W
#undef FN
#undef SFX
#define T double
#define IT int64_t
#define W 4
#define FN FN64
#define SFX(x) x##_f64_256
#include "formula_impl.h"
#undef T
#undef IT
#undef W
#undef FN
#undef SFX
#pragma GCC pop_options
#endif

#define T float
#define IT int32_t
#define W 4
#define FN FN32
#define SFX(x) x##_f32_128
#include "formula_impl.h"
#undef T
#undef IT
#undef W
#undef FN
#undef SFX
#define T double
#define IT int64_t
#define W 2
#define FN FN64
#define SFX(x) x##_f64_128
#include "formula_impl.h"
#undef T
#undef IT
#undef W
#undef FN
#undef SFX

// PICK, the evaluator's selector, calls its copy for the instruction set.
#if TL_X86
#define PICK(name, suf, args)                         \
  switch (tl_cpu_isa()) {                             \
  case TL_ISA_AVX512: name##_##suf##_512 args; break; \
  case TL_ISA_AVX2: name##_##suf##_256 args; break;   \
  default: name##_##suf##_128 args;                   \
  }
#else
#define PICK(name, suf, args) name##_##suf##_128 args;
#endif

void tl_fx_run_f32(const tl_fx_prog *p, int64_t n, const float *const *in, float *const *out, double *s,
                   float *scratch, uint64_t bcast) {
  PICK(run, f32, (p, n, in, out, s, scratch, bcast))
}
void tl_fx_run_f64(const tl_fx_prog *p, int64_t n, const double *const *in, double *const *out, double *s,
                   double *scratch, uint64_t bcast) {
  PICK(run, f64, (p, n, in, out, s, scratch, bcast))
}
void tl_fx_pairs_f32(const tl_fx_prog *p, int64_t m, int64_t n, int64_t d, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *out, int64_t ldo, const double *ra,
                     const double *rb, int64_t nr, double *s, float *scratch) {
  PICK(pairs, f32, (p, m, n, d, a, lda, b, ldb, out, ldo, ra, rb, nr, s, scratch))
}
void tl_fx_pairs_f64(const tl_fx_prog *p, int64_t m, int64_t n, int64_t d, const double *a, int64_t lda,
                     const double *b, int64_t ldb, double *out, int64_t ldo, const double *ra,
                     const double *rb, int64_t nr, double *s, double *scratch) {
  PICK(pairs, f64, (p, m, n, d, a, lda, b, ldb, out, ldo, ra, rb, nr, s, scratch))
}
void tl_fx_interp_f32(const tl_fx_prog *p, int64_t nq, int64_t m, const int32_t *start, const double *w,
                      const float *fpT, const float *x, float *out, double *s, float *vbuf, float *scratch) {
  PICK(interp, f32, (p, nq, m, start, w, fpT, x, out, s, vbuf, scratch))
}
void tl_fx_interp_f64(const tl_fx_prog *p, int64_t nq, int64_t m, const int32_t *start, const double *w,
                      const double *fpT, const double *x, double *out, double *s, double *vbuf,
                      double *scratch) {
  PICK(interp, f64, (p, nq, m, start, w, fpT, x, out, s, vbuf, scratch))
}
void tl_fx_stream_begin_f32(const tl_fx_prog *p, int32_t bi, double *s, float *scratch) {
  PICK(stream_begin, f32, (p, bi, s, scratch))
}
void tl_fx_stream_feed_f32(const tl_fx_prog *p, int32_t bi, int64_t n, const float *const *in, double *s,
                           float *scratch) {
  PICK(stream_feed, f32, (p, bi, n, in, s, scratch))
}
void tl_fx_stream_begin_f64(const tl_fx_prog *p, int32_t bi, double *s, double *scratch) {
  PICK(stream_begin, f64, (p, bi, s, scratch))
}
void tl_fx_stream_feed_f64(const tl_fx_prog *p, int32_t bi, int64_t n, const double *const *in, double *s,
                           double *scratch) {
  PICK(stream_feed, f64, (p, bi, n, in, s, scratch))
}
