// Blocked pairwise kernels: negative L1 and squared-L2 distances and dot
// products between the rows of two row-major matrices. (Float32 dot
// products on AVX-512 and arm64 go to the packed matrix product of gemm.c
// and gemm_neon.c instead; arm64 runs the other metrics in
// pairdist_neon.c.)
//
// The (m, n) output is computed in 4x4 register tiles: four rows of a
// against four rows of b, sixteen vector accumulators, streaming the k axis
// in blocks of KC elements so a tile's rows stay in L1 while the column
// block's rows stay in L2. Each function is compiled three times on
// x86-64, for AVX-512, AVX2 and baseline SSE2, with GCC vector extensions,
// and the widest the CPU supports is chosen at the first call; elsewhere
// once, for the architecture's baseline (NEON on arm64). Per-element results
// are accumulated in the element type per lane, and lanes are added at the
// end of each k block into the output, which holds the running sum.
#include "pairdist.h"
#include "gemm.h"
#include "isa.h"
#include <string.h>

#define KC 1024 // k block: 4 rows of a and 4 of b, 32 KiB of float32
#define NB 128  // column block: NB rows of b, KC elements each, in L2

// Per-element operations, for a vector type V and its integer twin VI.
#define OP_L1(V, VI, IT, x, y) ((V)((VI)((x) - (y)) & ((VI){0} + (IT)(~((IT)1 << (sizeof(IT) * 8 - 1))))))
#define OP_L2(V, VI, IT, x, y) (((x) - (y)) * ((x) - (y)))
#define OP_DOT(V, VI, IT, x, y) ((x) * (y))
#define SOP_L1(x, y) ((x) > (y) ? (x) - (y) : (y) - (x))
#define SOP_L2(x, y) (((x) - (y)) * ((x) - (y)))
#define SOP_DOT(x, y) ((x) * (y))

// DEFINE_KERNEL(NAME, T, IT, W, ATTR, OP, SOP, SIGN) defines
// kernel_NAME(m, n, d, a, lda, b, ldb, out, ldo): out = SIGN * sum_k OP(a, b),
// for element type T (integer twin IT), W lanes, compiled with ATTR.
// Every pair is summed in the same order wherever it sits in a tile, a
// block or the matrix: lane-wise over each k block, lanes added in order,
// then the scalar tail; so results do not depend on the blocking.
#define DEFINE_KERNEL(NAME, T, IT, W, ATTR, OP, SOP, SIGN)                               \
  typedef T v_##NAME __attribute__((vector_size(W * sizeof(T))));                       \
  typedef IT vi_##NAME __attribute__((vector_size(W * sizeof(T))));                     \
                                                                                        \
  static inline ATTR T hsum_##NAME(v_##NAME v) {                                        \
    T s = 0;                                                                            \
    for (int l = 0; l < W; l++) s += v[l];                                              \
    return s;                                                                           \
  }                                                                                     \
                                                                                        \
  static inline ATTR T pair_##NAME(const T *x, const T *y, int64_t k0, int64_t k1) {    \
    v_##NAME acc = {0};                                                                 \
    int64_t k = k0;                                                                     \
    for (; k + W <= k1; k += W) {                                                       \
      v_##NAME vx, vy;                                                                  \
      memcpy(&vx, x + k, sizeof(vx));                                                   \
      memcpy(&vy, y + k, sizeof(vy));                                                   \
      acc += OP(v_##NAME, vi_##NAME, IT, vx, vy);                                       \
    }                                                                                   \
    T s = hsum_##NAME(acc);                                                             \
    for (; k < k1; k++) s += SOP(x[k], y[k]);                                           \
    return s;                                                                           \
  }                                                                                     \
                                                                                        \
  static ATTR void tile4_##NAME(const T *a, int64_t lda, const T *b, int64_t ldb,       \
                                T *out, int64_t ldo, int64_t k0, int64_t k1) {          \
    v_##NAME acc[4][4];                                                                 \
    memset(acc, 0, sizeof(acc));                                                        \
    int64_t k = k0;                                                                     \
    for (; k + W <= k1; k += W) {                                                       \
      v_##NAME va[4], vb[4];                                                            \
      for (int r = 0; r < 4; r++) memcpy(&va[r], a + r * lda + k, sizeof(va[r]));       \
      for (int c = 0; c < 4; c++) memcpy(&vb[c], b + c * ldb + k, sizeof(vb[c]));       \
      for (int r = 0; r < 4; r++)                                                       \
        for (int c = 0; c < 4; c++) acc[r][c] += OP(v_##NAME, vi_##NAME, IT, va[r], vb[c]); \
    }                                                                                   \
    for (int r = 0; r < 4; r++)                                                         \
      for (int c = 0; c < 4; c++) {                                                     \
        T s = hsum_##NAME(acc[r][c]);                                                   \
        for (int64_t t = k; t < k1; t++) s += SOP(a[r * lda + t], b[c * ldb + t]);      \
        out[r * ldo + c] += SIGN s;                                                     \
      }                                                                                 \
  }                                                                                     \
                                                                                        \
  static ATTR void kernel_##NAME(int64_t m, int64_t n, int64_t d, const T *a,           \
                                 int64_t lda, const T *b, int64_t ldb, T *out,          \
                                 int64_t ldo) {                                         \
    for (int64_t i = 0; i < m; i++) memset(out + i * ldo, 0, n * sizeof(T));            \
    for (int64_t jb = 0; jb < n; jb += NB) {                                            \
      int64_t jn = n - jb < NB ? n - jb : NB;                                           \
      for (int64_t k0 = 0; k0 < d; k0 += KC) {                                          \
        int64_t k1 = d - k0 < KC ? d : k0 + KC;                                         \
        for (int64_t i = 0; i < m; i += 4) {                                            \
          int64_t mr = m - i < 4 ? m - i : 4;                                           \
          for (int64_t j = jb; j < jb + jn; j += 4) {                                   \
            int64_t nc = jb + jn - j < 4 ? jb + jn - j : 4;                             \
            const T *ta = a + i * lda, *tb = b + j * ldb;                               \
            T *to = out + i * ldo + j;                                                  \
            if (mr == 4 && nc == 4) {                                                   \
              tile4_##NAME(ta, lda, tb, ldb, to, ldo, k0, k1);                          \
            } else {                                                                    \
              for (int64_t r = 0; r < mr; r++)                                          \
                for (int64_t c = 0; c < nc; c++)                                        \
                  to[r * ldo + c] += SIGN pair_##NAME(ta + r * lda, tb + c * ldb, k0, k1); \
            }                                                                           \
          }                                                                             \
        }                                                                               \
      }                                                                                 \
    }                                                                                   \
  }

#if TL_X86
#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2,fma")))
#define DEFINE_ISAS(M, OP, SOP, SIGN)                                       \
  DEFINE_KERNEL(M##_f32_512, float, int32_t, 16, AVX512, OP, SOP, SIGN)     \
  DEFINE_KERNEL(M##_f32_256, float, int32_t, 8, AVX2, OP, SOP, SIGN)        \
  DEFINE_KERNEL(M##_f32_128, float, int32_t, 4, , OP, SOP, SIGN)            \
  DEFINE_KERNEL(M##_f64_512, double, int64_t, 8, AVX512, OP, SOP, SIGN)     \
  DEFINE_KERNEL(M##_f64_256, double, int64_t, 4, AVX2, OP, SOP, SIGN)       \
  DEFINE_KERNEL(M##_f64_128, double, int64_t, 2, , OP, SOP, SIGN)
#else // the baseline alone: 16-byte vectors (NEON on arm64)
#define DEFINE_ISAS(M, OP, SOP, SIGN)                                       \
  DEFINE_KERNEL(M##_f32_128, float, int32_t, 4, , OP, SOP, SIGN)            \
  DEFINE_KERNEL(M##_f64_128, double, int64_t, 2, , OP, SOP, SIGN)
#endif

DEFINE_ISAS(l1, OP_L1, SOP_L1, -)
DEFINE_ISAS(l2, OP_L2, SOP_L2, -)
DEFINE_ISAS(dot, OP_DOT, SOP_DOT, +)

static int isa = -1; // a TL_ISA_ level, once picked

// pick is the level the CPU runs (or the one tl_limit_isa set): the
// widest of this build's that the CPU supports.
static int pick(void) {
  if (isa < 0) {
#if TL_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) isa = TL_ISA_AVX512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isa = TL_ISA_AVX2;
    else isa = TL_ISA_BASE;
#else
    isa = TL_ISA_BASE;
#endif
  }
  return isa;
}

int tl_isa_top(void) { return TL_X86 ? TL_ISA_AVX512 : TL_ISA_BASE; }

const char *tl_pairdist_isa(void) {
  static const char *names[] = {[TL_ISA_BASE] = TL_ISA_BASE_NAME, [TL_ISA_AVX2] = "avx2", [TL_ISA_AVX512] = "avx512f"};
  return names[pick()];
}

// DISPATCH, the selector of the pairwise kernels, calls the kernel for the
// metric on the instruction set picked; a kernel of the baseline level
// written for one architecture goes in its TL_ISA_BASE cases.
#if TL_X86
#define DISPATCH(T, SUF)                                                                                         \
  switch (ISA_METRIC(pick(), metric)) {                                                                          \
  case ISA_METRIC(TL_ISA_AVX512, TL_PAIR_L1): kernel_l1_##SUF##_512(m, n, d, a, lda, b, ldb, out, ldo); break;   \
  case ISA_METRIC(TL_ISA_AVX512, TL_PAIR_L2): kernel_l2_##SUF##_512(m, n, d, a, lda, b, ldb, out, ldo); break;   \
  case ISA_METRIC(TL_ISA_AVX512, TL_PAIR_DOT): kernel_dot_##SUF##_512(m, n, d, a, lda, b, ldb, out, ldo); break; \
  case ISA_METRIC(TL_ISA_AVX2, TL_PAIR_L1): kernel_l1_##SUF##_256(m, n, d, a, lda, b, ldb, out, ldo); break;     \
  case ISA_METRIC(TL_ISA_AVX2, TL_PAIR_L2): kernel_l2_##SUF##_256(m, n, d, a, lda, b, ldb, out, ldo); break;     \
  case ISA_METRIC(TL_ISA_AVX2, TL_PAIR_DOT): kernel_dot_##SUF##_256(m, n, d, a, lda, b, ldb, out, ldo); break;   \
  case ISA_METRIC(TL_ISA_BASE, TL_PAIR_L1): kernel_l1_##SUF##_128(m, n, d, a, lda, b, ldb, out, ldo); break;     \
  case ISA_METRIC(TL_ISA_BASE, TL_PAIR_L2): kernel_l2_##SUF##_128(m, n, d, a, lda, b, ldb, out, ldo); break;     \
  default: kernel_dot_##SUF##_128(m, n, d, a, lda, b, ldb, out, ldo);                                            \
  }
#else
#define DISPATCH(T, SUF)                                                                                         \
  switch (ISA_METRIC(pick(), metric)) {                                                                          \
  case ISA_METRIC(TL_ISA_BASE, TL_PAIR_L1): kernel_l1_##SUF##_128(m, n, d, a, lda, b, ldb, out, ldo); break;     \
  case ISA_METRIC(TL_ISA_BASE, TL_PAIR_L2): kernel_l2_##SUF##_128(m, n, d, a, lda, b, ldb, out, ldo); break;     \
  default: kernel_dot_##SUF##_128(m, n, d, a, lda, b, ldb, out, ldo);                                            \
  }
#endif
#define ISA_METRIC(isa, metric) ((isa) * 3 + (metric))

void tl_pairdist_f32(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *out, int64_t ldo, int metric) {
  // Dot products on AVX-512 or arm64: the packed matrix product of gemm.c
  // or gemm_neon.c.
#if defined(__aarch64__) // the other metrics: pairdist_neon.c
  if (metric == TL_PAIR_DOT && tl_gemm_nt_f32_neon(m, n, d, a, lda, b, ldb, out, ldo, -1) == 0) return;
  if (tl_pairdist_f32_neon(m, n, d, a, lda, b, ldb, out, ldo, metric) == 0) return;
#endif
  if (metric == TL_PAIR_DOT && pick() == TL_ISA_AVX512 && tl_gemm_nt_f32_avx512(m, n, d, a, lda, b, ldb, out, ldo, -1) == 0) return;
  DISPATCH(float, f32)
}

void tl_dot_upper_f32(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                      float *out, int64_t ldo, int64_t lower) {
#if defined(__aarch64__)
  if (tl_gemm_nt_f32_neon(m, n, d, a, lda, b, ldb, out, ldo, lower) == 0) return;
#endif
  if (pick() == TL_ISA_AVX512 && tl_gemm_nt_f32_avx512(m, n, d, a, lda, b, ldb, out, ldo, lower) == 0) return;
  const int metric = TL_PAIR_DOT;
  DISPATCH(float, f32)
}

void tl_pairdist_f64(int64_t m, int64_t n, int64_t d, const double *a, int64_t lda,
                     const double *b, int64_t ldb, double *out, int64_t ldo, int metric) {
#if defined(__aarch64__)
  if (tl_pairdist_f64_neon(m, n, d, a, lda, b, ldb, out, ldo, metric) == 0) return;
#endif
  DISPATCH(double, f64)
}

int tl_cpu_isa(void) { return pick(); }

int tl_limit_isa(int limit) {
  int before = pick();
  isa = -1;
  if (pick() > limit) isa = limit < TL_ISA_BASE ? TL_ISA_BASE : limit;
  return before;
}
