// pairdist.c's pairwise kernels on arm64, with NEON: negative L1 and
// squared-L2 distances of float32 and float64 rows, and float64 dot
// products (float32 dot products go to the packed matrix product of
// gemm_neon.c).
//
// The blocking is pairdist.c's: 4×4 register tiles (four rows of a against
// four of b, sixteen vector accumulators), the k axis in blocks of KC
// elements, columns in blocks of NB rows of b. Each pair is summed in one
// order wherever it sits, so results do not depend on the blocking: per k
// block, lane by lane over whole vectors, the lanes added in order, then
// the scalar tail, the block's sum added to out. Per vector of a pair:
// L1 is one absolute difference (FABD) and one add; L2 one subtract and
// one fused multiply-add of the difference with itself; dot one fused
// multiply-add. The scalar tails use the same operations (fused where the
// vectors are), so that a pair computed in a tile and one computed alone
// agree bit for bit. The tiles are compiled without GCC's first
// instruction scheduling pass, which otherwise hoists all sixteen
// differences above their adds and spills an accumulator.
#if defined(__aarch64__)
#include "pairdist.h"
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define KC 1024 // k block: 4 rows of a and 4 of b, 32 KiB of float32
#define NB 128  // column block: NB rows of b, KC elements each, in L2

// Per vector (V*) and per element (S*): the term added for a pair, with
// OP an accumulator update acc = f(acc, x, y).
#define OPV_L1_f32(acc, x, y) vaddq_f32(acc, vabdq_f32(x, y))
#define OPV_L2_f32(acc, x, y) vfmaq_f32(acc, vsubq_f32(x, y), vsubq_f32(x, y))
#define OPV_DOT_f32(acc, x, y) vfmaq_f32(acc, x, y)
#define OPV_L1_f64(acc, x, y) vaddq_f64(acc, vabdq_f64(x, y))
#define OPV_L2_f64(acc, x, y) vfmaq_f64(acc, vsubq_f64(x, y), vsubq_f64(x, y))
#define OPV_DOT_f64(acc, x, y) vfmaq_f64(acc, x, y)
#define OPS_L1_f32(s, x, y) ((s) + fabsf((x) - (y)))
#define OPS_L2_f32(s, x, y) fmaf((x) - (y), (x) - (y), s)
#define OPS_DOT_f32(s, x, y) fmaf(x, y, s)
#define OPS_L1_f64(s, x, y) ((s) + fabs((x) - (y)))
#define OPS_L2_f64(s, x, y) fma((x) - (y), (x) - (y), s)
#define OPS_DOT_f64(s, x, y) fma(x, y, s)

#define HSUM_f32(v) (((vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 1)) + vgetq_lane_f32(v, 2)) + vgetq_lane_f32(v, 3))
#define HSUM_f64(v) (vgetq_lane_f64(v, 0) + vgetq_lane_f64(v, 1))

// DEFINE_NEON(M, SUF, T, V, W, LD, DUP, SIGN) defines neon_M_SUF(m, n, d,
// a, lda, b, ldb, out, ldo): out = SIGN Σ_k M(a, b), element type T, W
// lanes of vector type V.
#define DEFINE_NEON(M, SUF, T, V, W, LD, DUP, SIGN)                                                                    \
  static inline T pair_##M##_##SUF(const T *x, const T *y, int64_t k0, int64_t k1) {                                   \
    V acc = DUP(0);                                                                                                    \
    int64_t k = k0;                                                                                                    \
    for (; k + W <= k1; k += W) acc = OPV_##M##_##SUF(acc, LD(x + k), LD(y + k));                                         \
    T s = HSUM_##SUF(acc);                                                                                             \
    for (; k < k1; k++) s = OPS_##M##_##SUF(s, x[k], y[k]);                                                               \
    return s;                                                                                                          \
  }                                                                                                                    \
                                                                                                                       \
  static __attribute__((noinline, optimize("no-schedule-insns"))) void tile4_##M##_##SUF(const T *a, int64_t lda, const T *b, int64_t ldb, T *out,    \
                                                          int64_t ldo, int64_t k0, int64_t k1) {                       \
    V c00 = DUP(0), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00;                      \
    V c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;                          \
    const T *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;                                              \
    const T *b0 = b, *b1 = b + ldb, *b2 = b + 2 * ldb, *b3 = b + 3 * ldb;                                              \
    int64_t k = k0;                                                                                                    \
    for (; k + W <= k1; k += W) {                                                                                      \
      const V x0 = LD(a0 + k), x1 = LD(a1 + k), x2 = LD(a2 + k), x3 = LD(a3 + k);                                      \
      const V y0 = LD(b0 + k), y1 = LD(b1 + k), y2 = LD(b2 + k), y3 = LD(b3 + k);                                      \
      c00 = OPV_##M##_##SUF(c00, x0, y0), c01 = OPV_##M##_##SUF(c01, x0, y1), c02 = OPV_##M##_##SUF(c02, x0, y2);               \
      c03 = OPV_##M##_##SUF(c03, x0, y3), c10 = OPV_##M##_##SUF(c10, x1, y0), c11 = OPV_##M##_##SUF(c11, x1, y1);               \
      c12 = OPV_##M##_##SUF(c12, x1, y2), c13 = OPV_##M##_##SUF(c13, x1, y3), c20 = OPV_##M##_##SUF(c20, x2, y0);               \
      c21 = OPV_##M##_##SUF(c21, x2, y1), c22 = OPV_##M##_##SUF(c22, x2, y2), c23 = OPV_##M##_##SUF(c23, x2, y3);               \
      c30 = OPV_##M##_##SUF(c30, x3, y0), c31 = OPV_##M##_##SUF(c31, x3, y1), c32 = OPV_##M##_##SUF(c32, x3, y2);               \
      c33 = OPV_##M##_##SUF(c33, x3, y3);                                                                                 \
    }                                                                                                                  \
    const V acc[4][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}};      \
    for (int r = 0; r < 4; r++)                                                                                        \
      for (int c = 0; c < 4; c++) {                                                                                    \
        T s = HSUM_##SUF(acc[r][c]);                                                                                   \
        for (int64_t t = k; t < k1; t++) s = OPS_##M##_##SUF(s, a[r * lda + t], b[c * ldb + t]);                         \
        out[r * ldo + c] += SIGN s;                                                                                    \
      }                                                                                                                \
  }                                                                                                                    \
                                                                                                                       \
  static void neon_##M##_##SUF(int64_t m, int64_t n, int64_t d, const T *a, int64_t lda, const T *b, int64_t ldb,      \
                               T *out, int64_t ldo) {                                                                  \
    for (int64_t i = 0; i < m; i++) memset(out + i * ldo, 0, n * sizeof(T));                                           \
    for (int64_t jb = 0; jb < n; jb += NB) {                                                                           \
      const int64_t jn = n - jb < NB ? n - jb : NB;                                                                    \
      for (int64_t k0 = 0; k0 < d; k0 += KC) {                                                                         \
        const int64_t k1 = d - k0 < KC ? d : k0 + KC;                                                                  \
        for (int64_t i = 0; i < m; i += 4) {                                                                           \
          const int64_t mr = m - i < 4 ? m - i : 4;                                                                    \
          for (int64_t j = jb; j < jb + jn; j += 4) {                                                                  \
            const int64_t nc = jb + jn - j < 4 ? jb + jn - j : 4;                                                      \
            const T *ta = a + i * lda, *tb = b + j * ldb;                                                              \
            T *to = out + i * ldo + j;                                                                                 \
            if (mr == 4 && nc == 4) {                                                                                  \
              tile4_##M##_##SUF(ta, lda, tb, ldb, to, ldo, k0, k1);                                                    \
              continue;                                                                                                \
            }                                                                                                          \
            for (int64_t r = 0; r < mr; r++)                                                                           \
              for (int64_t c = 0; c < nc; c++) to[r * ldo + c] += SIGN pair_##M##_##SUF(ta + r * lda, tb + c * ldb, k0, k1); \
          }                                                                                                            \
        }                                                                                                              \
      }                                                                                                                \
    }                                                                                                                  \
  }

DEFINE_NEON(L1, f32, float, float32x4_t, 4, vld1q_f32, vdupq_n_f32, -)
DEFINE_NEON(L2, f32, float, float32x4_t, 4, vld1q_f32, vdupq_n_f32, -)
DEFINE_NEON(L1, f64, double, float64x2_t, 2, vld1q_f64, vdupq_n_f64, -)
DEFINE_NEON(L2, f64, double, float64x2_t, 2, vld1q_f64, vdupq_n_f64, -)
DEFINE_NEON(DOT, f64, double, float64x2_t, 2, vld1q_f64, vdupq_n_f64, +)

int tl_pairdist_f32_neon(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float *out, int64_t ldo, int metric) {
  switch (metric) {
  case TL_PAIR_L1: neon_L1_f32(m, n, d, a, lda, b, ldb, out, ldo); return 0;
  case TL_PAIR_L2: neon_L2_f32(m, n, d, a, lda, b, ldb, out, ldo); return 0;
  default: return -1; // dot products: gemm_neon.c
  }
}

int tl_pairdist_f64_neon(int64_t m, int64_t n, int64_t d, const double *a, int64_t lda, const double *b, int64_t ldb,
                         double *out, int64_t ldo, int metric) {
  switch (metric) {
  case TL_PAIR_L1: neon_L1_f64(m, n, d, a, lda, b, ldb, out, ldo); return 0;
  case TL_PAIR_L2: neon_L2_f64(m, n, d, a, lda, b, ldb, out, ldo); return 0;
  case TL_PAIR_DOT: neon_DOT_f64(m, n, d, a, lda, b, ldb, out, ldo); return 0;
  default: return -1;
  }
}
#endif
