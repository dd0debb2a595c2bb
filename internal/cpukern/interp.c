// Cubic interpolation of M interpolants on a shared uniform grid, at a
// batch of queries: the reductions of the interpolation workload.
//
// Every kernel first places its queries WD at a time in double vectors:
// clamp, floor, the cell's start and the four cubic weights, in double as
// ops.InterpTable defines them. The Gram kernel then reads the 10 entries
// of each lane's 4×4 Gram matrix and forms wᵀ·G·w, the column-sum kernel
// the 4 column sums and w·c: no per-interpolant work at all. Each lane's
// entries are read with contiguous loads and transposed by shuffles: on
// the machine measured (Xeon, Emerald Rapids, in a VM) ten gathers per
// vector took half as long again.
//
// The values and reduce kernels go query by query along the M interpolants
// in vectors of the element type. A table of values larger than the L2
// cache would have each query read its four rows from L3 or memory, so
// they take the queries NB at a time in the order of their cells (a
// counting sort): neighbouring queries then share rows in L1 and L2, and
// the table is read once per NB queries, in order. The values kernel can
// write with non-temporal stores only, for outputs far larger than the
// caches, which then cost one pass over memory instead of two (read for
// ownership, write); rows written out of order must not mix in ordinary
// stores, which wait on the read of their line and hold up the others.
//
// All are written once, in interp_impl.h, and compiled below for AVX-512
// (8 doubles, 16 floats per vector), AVX2 (4, 8) and baseline SSE2 (2, 4)
// on x86-64, where tl_cpu_isa() picks, and elsewhere for the baseline
// alone, with GCC vector extensions (2, 4: NEON on arm64), for float and
// double.
#include "interp.h"
#include "isa.h"
#include "pairdist.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CAT2_(a, b) a##_##b
#define CAT2(a, b) CAT2_(a, b)
#define CAT3_(a, b, c) a##_##b##_##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define SFX(name) CAT3(name, TS, ISA)

// QB: queries placed at a time by the values and reduce kernels; NB:
// queries sorted by their cells at a time.
enum { QB = 64, NB = 16384 };

// What the values and reduce kernels compute.
enum { VALUES, SUMSQ, SUM };

// The cubic weight polynomials: w_k(t) = a_k + t*(b_k + t*(c_k + t*d_k)).
static const double cub_a[4] = {-1.0 / 16, 9.0 / 16, 9.0 / 16, -1.0 / 16};
static const double cub_b[4] = {1.0 / 24, -9.0 / 8, 9.0 / 8, -1.0 / 24};
static const double cub_c[4] = {1.0 / 4, -1.0 / 4, -1.0 / 4, 1.0 / 4};
static const double cub_d[4] = {-1.0 / 6, 1.0 / 2, -1.0 / 2, 1.0 / 6};

typedef struct {
  double a, dx, ub;
  double gm2, rdx; // the last start, g - 2, and 1/dx
} tl_grid;

// tl_order is the scratch of a counting sort of NB queries by their
// starts s, on the key s >> shift, which takes nbk ≤ NB values.
typedef struct {
  int32_t *key, *perm, *count; // NB, NB, NB + 1
  int shift;
  int64_t nbk;
} tl_order;

#if TL_X86
// nt_copy_f32 and nt_copy_f64 copy k elements from s to d with
// non-temporal stores: 16 bytes at a time where d is aligned to 16, one
// element at a time elsewhere.
static inline void nt_copy_f32(float *d, const float *s, int64_t k) {
  for (; k > 0 && ((uintptr_t)d & 15); k--, d++, s++) {
    int v;
    memcpy(&v, s, sizeof(v));
    _mm_stream_si32((int *)d, v);
  }
  for (; k >= 4; k -= 4, d += 4, s += 4) _mm_stream_ps(d, _mm_loadu_ps(s));
  for (; k > 0; k--, d++, s++) {
    int v;
    memcpy(&v, s, sizeof(v));
    _mm_stream_si32((int *)d, v);
  }
}
static inline void nt_copy_f64(double *d, const double *s, int64_t k) {
  for (; k > 0 && ((uintptr_t)d & 15); k--, d++, s++) {
    long long v;
    memcpy(&v, s, sizeof(v));
    _mm_stream_si64((long long *)d, v);
  }
  for (; k >= 2; k -= 2, d += 2, s += 2) _mm_stream_pd(d, _mm_loadu_pd(s));
  for (; k > 0; k--, d++, s++) {
    long long v;
    memcpy(&v, s, sizeof(v));
    _mm_stream_si64((long long *)d, v);
  }
}
// STREAM_FENCE orders the non-temporal stores before what follows.
#define STREAM_FENCE() _mm_sfence()
#else // ordinary stores: GCC has no portable non-temporal store
static inline void nt_copy_f32(float *d, const float *s, int64_t k) { memcpy(d, s, sizeof(float) * k); }
static inline void nt_copy_f64(double *d, const double *s, int64_t k) { memcpy(d, s, sizeof(double) * k); }
#define STREAM_FENCE() ((void)0)
#endif

// ACC_f32 and ACC_f64 add the lanes of a vector of values, or their
// squares, in double to lo and hi: for float, its halves widened by
// WIDEN_LO and WIDEN_HI; for double, all to lo.
#define ACC_f32(v, sumsq, lo, hi)                \
  do {                                           \
    const VD a_ = WIDEN_LO(v), b_ = WIDEN_HI(v); \
    if (sumsq) {                                 \
      lo = D_FMA(a_, a_, lo);                    \
      hi = D_FMA(b_, b_, hi);                    \
    } else {                                     \
      lo += a_;                                  \
      hi += b_;                                  \
    }                                            \
  } while (0)
#define ACC_f64(v, sumsq, lo, hi) \
  do {                            \
    const VD a_ = (VD)(v);        \
    if (sumsq)                    \
      lo = D_FMA(a_, a_, lo);     \
    else                          \
      lo += a_;                   \
  } while (0)

#if TL_X86
// ---- AVX-512 ----
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw")
// div_avx512 is r/d correctly rounded, from rd = 1/d correctly rounded:
// q = r·rd is within an ulp of r/d, so the remainder r - q·d is exact in an
// FMA, and q + (r - q·d)·rd rounds to r/d (Markstein's theorem: P.
// Markstein, IBM J. Res. Dev. 34(1), 1990). The division instruction took
// a tenth of the Gram kernel's time; these three take about half that.
static inline __m512d div_avx512(__m512d r, __m512d d, __m512d rd) {
  const __m512d q = r * rd;
  return _mm512_fmadd_pd(_mm512_fnmadd_pd(q, d, r), rd, q);
}
// pair4_avx512 is the 4 doubles at lo, then the 4 at hi.
static inline __m512d pair4_avx512(const double *lo, const double *hi) {
  return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(lo)), _mm256_loadu_pd(hi), 1);
}
// quad2_avx512 is the 2 doubles at each of p0, p1, p2, p3.
static inline __m512d quad2_avx512(const double *p0, const double *p1, const double *p2, const double *p3) {
  __m512d v = _mm512_castpd128_pd512(_mm_loadu_pd(p0));
  v = _mm512_insertf64x2(v, _mm_loadu_pd(p1), 1);
  v = _mm512_insertf64x2(v, _mm_loadu_pd(p2), 2);
  return _mm512_insertf64x2(v, _mm_loadu_pd(p3), 3);
}
// cols_avx512 sets c[k] to p[off[l] + j + k] in lane l, k < 4: loaded in
// pairs of lanes (0 2, 1 3, 4 6, 5 7), which the shuffles bring into order.
static inline __attribute__((always_inline)) void cols_avx512(const double *p, const int64_t *off, int j,
                                                               __m512d c[4]) {
  const __m512d a0 = pair4_avx512(p + off[0] + j, p + off[2] + j), a1 = pair4_avx512(p + off[1] + j, p + off[3] + j);
  const __m512d a2 = pair4_avx512(p + off[4] + j, p + off[6] + j), a3 = pair4_avx512(p + off[5] + j, p + off[7] + j);
  const __m512d u0 = _mm512_shuffle_f64x2(a0, a2, 0x88), u1 = _mm512_shuffle_f64x2(a1, a3, 0x88);
  const __m512d u2 = _mm512_shuffle_f64x2(a0, a2, 0xDD), u3 = _mm512_shuffle_f64x2(a1, a3, 0xDD);
  c[0] = _mm512_unpacklo_pd(u0, u1), c[1] = _mm512_unpackhi_pd(u0, u1);
  c[2] = _mm512_unpacklo_pd(u2, u3), c[3] = _mm512_unpackhi_pd(u2, u3);
}
static inline __attribute__((always_inline)) void gram_avx512(const double *p, const int64_t *off, __m512d e[10]) {
  cols_avx512(p, off, 0, e);
  cols_avx512(p, off, 4, e + 4);
  const double *q[8];
  for (int l = 0; l < 8; l++) q[l] = p + off[l] + 8;
  const __m512d u = quad2_avx512(q[0], q[2], q[4], q[6]), v = quad2_avx512(q[1], q[3], q[5], q[7]);
  e[8] = _mm512_unpacklo_pd(u, v), e[9] = _mm512_unpackhi_pd(u, v);
}
#define ISA avx512
#define WD 8
#define VD __m512d
#define VX __m512i
#define D_SET1 _mm512_set1_pd
#define D_MIN _mm512_min_pd
#define D_MAX _mm512_max_pd
#define D_FLOOR(v) _mm512_roundscale_pd(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define D_FMA _mm512_fmadd_pd
#define D_DIV div_avx512
#define D_INDEX _mm512_cvttpd_epi64
#define D_STORE_INDEX(p, i) _mm512_store_si512(p, i)
#define D_GRAM gram_avx512
#define D_COLS(p, off, c) cols_avx512(p, off, 0, c)
#define D_LOAD_f32(p) _mm512_cvtps_pd(_mm256_loadu_ps(p))
#define D_LOAD_f64 _mm512_loadu_pd
#define D_STORE_f32(p, v) _mm256_storeu_ps(p, _mm512_cvtpd_ps(v))
#define D_STORE_f64 _mm512_storeu_pd
#define VB 64
#define STREAM_f32(p, v) _mm512_stream_ps(p, (__m512)(v))
#define STREAM_f64(p, v) _mm512_stream_pd(p, (__m512d)(v))
#define MSTORE_HI_f32(p, v, k) _mm512_mask_storeu_ps(p, (__mmask16)(0xFFFFu << (16 - (k))), (__m512)(v))
#define MSTORE_HI_f64(p, v, k) _mm512_mask_storeu_pd(p, (__mmask8)(0xFFu << (8 - (k))), (__m512d)(v))
#define WIDEN_LO(v) _mm512_cvtps_pd(_mm512_castps512_ps256((__m512)(v)))
#define WIDEN_HI(v) _mm512_cvtps_pd(_mm512_extractf32x8_ps((__m512)(v), 1))
#include "interp_types.h"
#pragma GCC pop_options

// ---- AVX2 ----
#pragma GCC push_options
#pragma GCC target("avx2,fma")
// div_avx2 is div_avx512 for AVX2.
static inline __m256d div_avx2(__m256d r, __m256d d, __m256d rd) {
  const __m256d q = r * rd;
  return _mm256_fmadd_pd(_mm256_fnmadd_pd(q, d, r), rd, q);
}
// index_avx2 converts integer-valued doubles in [0, 2^52) to int64.
static inline __m256i index_avx2(__m256d v) {
  const __m256d m = _mm256_set1_pd(0x1p52);
  return _mm256_sub_epi64(_mm256_castpd_si256(v + m), _mm256_castpd_si256(m));
}
// The last k lanes of 8 int32, 4 int64.
static inline __m256i hi32_avx2(int k) { return _mm256_cmpgt_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(7 - k)); }
static inline __m256i hi64_avx2(int k) { return _mm256_cmpgt_epi64(_mm256_setr_epi64x(0, 1, 2, 3), _mm256_set1_epi64x(3 - k)); }
// pair2_avx2 is the 2 doubles at lo, then the 2 at hi.
static inline __m256d pair2_avx2(const double *lo, const double *hi) {
  return _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(lo)), _mm_loadu_pd(hi), 1);
}
// cols_avx2 sets c[k] to p[off[l] + j + k] in lane l, k < 4 (k < 2 when
// two).
static inline __attribute__((always_inline)) void cols_avx2(const double *p, const int64_t *off, int j, int two,
                                                             __m256d *c) {
  const __m256d a0 = pair2_avx2(p + off[0] + j, p + off[2] + j), a1 = pair2_avx2(p + off[1] + j, p + off[3] + j);
  c[0] = _mm256_unpacklo_pd(a0, a1), c[1] = _mm256_unpackhi_pd(a0, a1);
  if (two) return;
  const __m256d a2 = pair2_avx2(p + off[0] + j + 2, p + off[2] + j + 2);
  const __m256d a3 = pair2_avx2(p + off[1] + j + 2, p + off[3] + j + 2);
  c[2] = _mm256_unpacklo_pd(a2, a3), c[3] = _mm256_unpackhi_pd(a2, a3);
}
static inline __attribute__((always_inline)) void gram_avx2(const double *p, const int64_t *off, __m256d e[10]) {
  cols_avx2(p, off, 0, 0, e);
  cols_avx2(p, off, 4, 0, e + 4);
  cols_avx2(p, off, 8, 1, e + 8);
}
#define ISA avx2
#define WD 4
#define VD __m256d
#define VX __m256i
#define D_SET1 _mm256_set1_pd
#define D_MIN _mm256_min_pd
#define D_MAX _mm256_max_pd
#define D_FLOOR _mm256_floor_pd
#define D_FMA _mm256_fmadd_pd
#define D_DIV div_avx2
#define D_INDEX index_avx2
#define D_STORE_INDEX(p, i) _mm256_store_si256((__m256i *)(p), i)
#define D_GRAM gram_avx2
#define D_COLS(p, off, c) cols_avx2(p, off, 0, 0, c)
#define D_LOAD_f32(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
#define D_LOAD_f64 _mm256_loadu_pd
#define D_STORE_f32(p, v) _mm_storeu_ps(p, _mm256_cvtpd_ps(v))
#define D_STORE_f64 _mm256_storeu_pd
#define VB 32
#define STREAM_f32(p, v) _mm256_stream_ps(p, (__m256)(v))
#define STREAM_f64(p, v) _mm256_stream_pd(p, (__m256d)(v))
#define MSTORE_HI_f32(p, v, k) _mm256_maskstore_ps(p, hi32_avx2(k), (__m256)(v))
#define MSTORE_HI_f64(p, v, k) _mm256_maskstore_pd(p, hi64_avx2(k), (__m256d)(v))
#define WIDEN_LO(v) _mm256_cvtps_pd(_mm256_castps256_ps128((__m256)(v)))
#define WIDEN_HI(v) _mm256_cvtps_pd(_mm256_extractf128_ps((__m256)(v), 1))
#include "interp_types.h"
#pragma GCC pop_options

// ---- SSE2: the baseline, no gathers, no FMA, floor from libm ----
static inline __m128d floor_sse2(__m128d u) { return _mm_set_pd(floor(u[1]), floor(u[0])); }
static inline __m128i index_sse2(__m128d v) {
  const __m128d m = _mm_set1_pd(0x1p52);
  return _mm_sub_epi64(_mm_castpd_si128(v + m), _mm_castpd_si128(m));
}
static inline void cols_sse2(const double *p, const int64_t *off, int n, __m128d *c) {
  for (int k = 0; k < n; k++) c[k] = _mm_set_pd(p[off[1] + k], p[off[0] + k]);
}
#define MSTORE_SSE2(T, p, v, lo, hi)                  \
  do {                                                \
    T *p_ = (p);                                      \
    for (int l_ = (lo); l_ < (hi); l_++) p_[l_] = (v)[l_]; \
  } while (0)
#define ISA sse2
#define WD 2
#define VD __m128d
#define VX __m128i
#define D_SET1 _mm_set1_pd
#define D_MIN _mm_min_pd
#define D_MAX _mm_max_pd
#define D_FLOOR floor_sse2
#define D_FMA(a, b, c) ((a) * (b) + (c))
#define D_DIV(r, d, rd) ((r) / (d))
#define D_INDEX index_sse2
#define D_STORE_INDEX(p, i) _mm_store_si128((__m128i *)(p), i)
#define D_GRAM(p, off, e) cols_sse2(p, off, 10, e)
#define D_COLS(p, off, c) cols_sse2(p, off, 4, c)
#define D_LOAD_f32(p) _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(p))))
#define D_LOAD_f64 _mm_loadu_pd
#define D_STORE_f32(p, v) _mm_storel_epi64((__m128i *)(p), _mm_castps_si128(_mm_cvtpd_ps(v)))
#define D_STORE_f64 _mm_storeu_pd
#define VB 16
#define STREAM_f32(p, v) _mm_stream_ps(p, (__m128)(v))
#define STREAM_f64(p, v) _mm_stream_pd(p, (__m128d)(v))
#define MSTORE_HI_f32(p, v, k) MSTORE_SSE2(float, p, v, 4 - (k), 4)
#define MSTORE_HI_f64(p, v, k) MSTORE_SSE2(double, p, v, 2 - (k), 2)
#define WIDEN_LO(v) _mm_cvtps_pd((__m128)(v))
#define WIDEN_HI(v) _mm_cvtps_pd(_mm_movehl_ps((__m128)(v), (__m128)(v)))
#include "interp_types.h"

#else // ---- the baseline of other architectures: GCC vector extensions (NEON on arm64) ----
typedef double vd2_base __attribute__((vector_size(16)));
typedef int64_t vx2_base __attribute__((vector_size(16)));
static inline vd2_base set1_base(double x) { return (vd2_base){x, x}; }
// min_base and max_base take the second operand where the first is NaN
// or the two are equal, as interp_impl.h asks.
static inline vd2_base min_base(vd2_base a, vd2_base b) {
  const vx2_base m = a < b;
  return (vd2_base)((m & (vx2_base)a) | (~m & (vx2_base)b));
}
static inline vd2_base max_base(vd2_base a, vd2_base b) {
  const vx2_base m = a > b;
  return (vd2_base)((m & (vx2_base)a) | (~m & (vx2_base)b));
}
static inline vd2_base floor_base(vd2_base u) { return (vd2_base){floor(u[0]), floor(u[1])}; }
static inline vx2_base index_base(vd2_base v) { return __builtin_convertvector(v, vx2_base); }
static inline void store_index_base(int64_t *p, vx2_base i) { memcpy(p, &i, sizeof(i)); }
static inline void cols_base(const double *p, const int64_t *off, int n, vd2_base *c) {
  for (int k = 0; k < n; k++) c[k] = (vd2_base){p[off[0] + k], p[off[1] + k]};
}
static inline vd2_base load_f32_base(const float *p) { return (vd2_base){p[0], p[1]}; }
static inline vd2_base load_f64_base(const double *p) {
  vd2_base v;
  memcpy(&v, p, sizeof(v));
  return v;
}
static inline void store_f32_base(float *p, vd2_base v) { p[0] = (float)v[0], p[1] = (float)v[1]; }
static inline void store_f64_base(double *p, vd2_base v) { memcpy(p, &v, sizeof(v)); }
#define STORE_BASE(p, v)                   \
  do {                                     \
    const __typeof__(v) v_ = (v);          \
    memcpy((p), &v_, sizeof(v_));          \
  } while (0)
#define MSTORE_BASE(T, p, v, lo, hi)                        \
  do {                                                      \
    T *p_ = (p);                                            \
    const __typeof__(v) v_ = (v);                           \
    for (int l_ = (lo); l_ < (hi); l_++) p_[l_] = v_[l_];   \
  } while (0)
#define ISA base
#define WD 2
#define VD vd2_base
#define VX vx2_base
#define D_SET1 set1_base
#define D_MIN min_base
#define D_MAX max_base
#define D_FLOOR floor_base
#define D_FMA(a, b, c) ((a) * (b) + (c))
#define D_DIV(r, d, rd) ((r) / (d))
#define D_INDEX index_base
#define D_STORE_INDEX store_index_base
#define D_GRAM(p, off, e) cols_base(p, off, 10, e)
#define D_COLS(p, off, c) cols_base(p, off, 4, c)
#define D_LOAD_f32 load_f32_base
#define D_LOAD_f64 load_f64_base
#define D_STORE_f32 store_f32_base
#define D_STORE_f64 store_f64_base
#define VB 16
#define STREAM_f32 STORE_BASE
#define STREAM_f64 STORE_BASE
#define MSTORE_HI_f32(p, v, k) MSTORE_BASE(float, p, v, 4 - (k), 4)
#define MSTORE_HI_f64(p, v, k) MSTORE_BASE(double, p, v, 2 - (k), 2)
#define WIDEN_LO(v) ((vd2_base){(v)[0], (v)[1]})
#define WIDEN_HI(v) ((vd2_base){(v)[2], (v)[3]})
#include "interp_types.h"
#endif

// ---- entry points ----

#define GRID {a, dx, ub, (double)(g - 2), 1 / dx}
// PICK, the selector of the kernels, calls the copy for the instruction
// set.
#if TL_X86
#define PICK(name, TS, ...)                                       \
  do {                                                            \
    const tl_grid grid = GRID;                                    \
    switch (tl_cpu_isa()) {                                       \
    case TL_ISA_AVX512: name##_##TS##_avx512(__VA_ARGS__); break; \
    case TL_ISA_AVX2: name##_##TS##_avx2(__VA_ARGS__); break;     \
    default: name##_##TS##_sse2(__VA_ARGS__);                     \
    }                                                             \
  } while (0)
#else
#define PICK(name, TS, ...)                                       \
  do {                                                            \
    const tl_grid grid = GRID;                                    \
    name##_##TS##_base(__VA_ARGS__);                              \
  } while (0)
#endif

void tl_interp_gram_f32(int64_t n, const float *x, float *out, int64_t g, double a, double dx, double ub,
                        const double *gram) {
  PICK(gram, f32, n, x, out, &grid, gram);
}
void tl_interp_gram_f64(int64_t n, const double *x, double *out, int64_t g, double a, double dx, double ub,
                        const double *gram) {
  PICK(gram, f64, n, x, out, &grid, gram);
}
void tl_interp_colsum_f32(int64_t n, const float *x, float *out, int64_t g, double a, double dx, double ub,
                          const double *colsum) {
  PICK(colsum, f32, n, x, out, &grid, colsum);
}
void tl_interp_colsum_f64(int64_t n, const double *x, double *out, int64_t g, double a, double dx, double ub,
                          const double *colsum) {
  PICK(colsum, f64, n, x, out, &grid, colsum);
}
// sort_bytes: the values and reduce kernels sort the queries by their
// cells when the table of values is larger than this (and there are more
// than QB queries): read in query order, rows of a larger table come from
// L3 or memory, four per query; in cell order, neighbouring queries share
// them in L1 and L2, and the table is read once per NB queries, in order.
static int64_t sort_bytes = 1 << 20;

int64_t tl_interp_sort_bytes(int64_t b) {
  int64_t before = sort_bytes;
  sort_bytes = b;
  return before;
}

// order_new returns the sort's scratch for a grid of g points, or NULL
// when the table of m values of size bytes, or n queries, do not call for
// a sort, or there is no memory for it (then the kernels go in query
// order).
static tl_order *order_new(int64_t n, int64_t g, int64_t m, int64_t size) {
  if (n <= QB || (g + 2) * m * size <= sort_bytes) return NULL;
  tl_order *o = malloc(sizeof(tl_order) + sizeof(int32_t) * (3 * (int64_t)NB + 1));
  if (!o) return NULL;
  o->key = (int32_t *)(o + 1), o->perm = o->key + NB, o->count = o->perm + NB;
  o->shift = 0;
  while (((g - 2) >> o->shift) + 1 > NB) o->shift++;
  o->nbk = ((g - 2) >> o->shift) + 1;
  return o;
}

#define DIRECT(TS, T, mode, stream)                                  \
  do {                                                               \
    tl_order *o = order_new(n, g, m, sizeof(T));                     \
    PICK(direct, TS, n, x, out, &grid, fpT, m, mode, stream, o);     \
    free(o);                                                         \
  } while (0)

void tl_interp_values_f32(int64_t n, const float *x, float *out, int64_t g, double a, double dx, double ub,
                          const float *fpT, int64_t m, int stream) {
  DIRECT(f32, float, VALUES, stream);
}
void tl_interp_values_f64(int64_t n, const double *x, double *out, int64_t g, double a, double dx, double ub,
                          const double *fpT, int64_t m, int stream) {
  DIRECT(f64, double, VALUES, stream);
}
void tl_interp_reduce_f32(int64_t n, const float *x, float *out, int64_t g, double a, double dx, double ub,
                          const float *fpT, int64_t m, int sumsq) {
  DIRECT(f32, float, sumsq ? SUMSQ : SUM, 0);
}
void tl_interp_reduce_f64(int64_t n, const double *x, double *out, int64_t g, double a, double dx, double ub,
                          const double *fpT, int64_t m, int sumsq) {
  DIRECT(f64, double, sumsq ? SUMSQ : SUM, 0);
}
