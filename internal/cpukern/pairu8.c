// Pairwise affinities of 8-bit images, exactly, in integers: dot products
// and squared L2 distances from Σ a·b (AVX-512 VNNI: vpdpbusd multiplies
// unsigned by signed bytes, so b is shifted to signed, b − 128, and 128·Σa
// added back), L1 distances from Σ |a − b| (vpsadbw). Sums are exact in
// int64 whatever the order, so results do not depend on blocking; they are
// converted to the output's float type only at the end (cosine: the exact
// dot product over the exact norms, in double).
#include "pairu8.h"
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

// The largest k block whose int32 lane sums cannot overflow: a lane adds
// at most 4·255·128 per 64 bytes.
#define KB (1 << 19)

// put converts the exact sum s of a pair (Σa·b, or Σ|a−b| for l1) to the
// metric at out[at]: for the integer metrics the value is exact in double
// (|v| < 2⁵³), so float is the exact value correctly rounded.
static inline void put(int metric, int64_t s, int64_t sa, int64_t sb, float *out32, double *out64, int64_t at) {
  double v;
  switch (metric) {
  case TL_U8_L1: v = (double)-s; break;
  case TL_U8_L2: v = (double)-(sa + sb - 2 * s); break;
  case TL_U8_COSINE: v = (double)s / (sqrt((double)sa) * sqrt((double)sb)); break;
  default: v = (double)s;
  }
  if (out32)
    out32[at] = (float)v;
  else
    out64[at] = v;
}

static int64_t dot_scalar(const uint8_t *a, const uint8_t *b, int64_t d) {
  int64_t s = 0;
  for (int64_t k = 0; k < d; k++) s += (int32_t)a[k] * (int32_t)b[k];
  return s;
}

static int64_t l1_scalar(const uint8_t *a, const uint8_t *b, int64_t d) {
  int64_t s = 0;
  for (int64_t k = 0; k < d; k++) s += a[k] > b[k] ? a[k] - b[k] : b[k] - a[k];
  return s;
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni")

// lanes64 adds the sixteen int32 lanes of x in int64 (their sum may not
// fit an int32).
static inline int64_t lanes64(__m512i x) {
  return _mm512_reduce_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(x))) +
         _mm512_reduce_add_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(x, 1)));
}

// tile_vnni sets v[r*4+c] to Σ a_r·b_c (dot) or Σ |a_r − b_c| (l1, sad) for
// rows a_r = a + r·lda, b_c = b + c·ldb, r < mr, c < nc (≤ 4).
static void tile_vnni(const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb, int64_t d, int mr, int nc,
                      int sad, int64_t v[16]) {
  for (int i = 0; i < 16; i++) v[i] = 0;
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  for (int64_t k0 = 0; k0 < d; k0 += KB) {
    const int64_t k1 = d - k0 < KB ? d : k0 + KB;
    __m512i acc[4][4];
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_si512();
    for (int64_t k = k0; k < k1; k += 64) {
      const __mmask64 m = k1 - k >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (k1 - k)) - 1);
      __m512i va[4], vb[4];
      for (int r = 0; r < 4; r++) va[r] = r < mr ? _mm512_maskz_loadu_epi8(m, a + r * lda + k) : _mm512_setzero_si512();
      for (int c = 0; c < 4; c++) vb[c] = c < nc ? _mm512_maskz_loadu_epi8(m, b + c * ldb + k) : _mm512_setzero_si512();
      if (sad) {
        for (int r = 0; r < 4; r++)
          for (int c = 0; c < 4; c++) acc[r][c] = _mm512_add_epi64(acc[r][c], _mm512_sad_epu8(va[r], vb[c]));
      } else {
        for (int c = 0; c < 4; c++) vb[c] = _mm512_xor_si512(vb[c], flip); // b − 128 as signed bytes
        for (int r = 0; r < 4; r++)
          for (int c = 0; c < 4; c++) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], va[r], vb[c]);
      }
    }
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 4; c++)
        v[r * 4 + c] += sad ? _mm512_reduce_add_epi64(acc[r][c]) : lanes64(acc[r][c]);
  }
}

static void pairs_vnni(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                       int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, float *out32,
                       double *out64, int64_t ldo) {
  const int sad = metric == TL_U8_L1;
  int64_t v[16];
  for (int64_t jb = 0; jb < n; jb += 64) // column blocks that stay in L2
    for (int64_t i = 0; i < m; i += 4)
      for (int64_t j = jb; j < jb + 64 && j < n; j += 4) {
        const int mr = m - i < 4 ? (int)(m - i) : 4, nc = n - j < 4 ? (int)(n - j) : 4;
        tile_vnni(a + i * lda, lda, b + j * ldb, ldb, d, mr, nc, sad, v);
        for (int r = 0; r < mr; r++)
          for (int c = 0; c < nc; c++)
            put(metric, sad ? v[r * 4 + c] : v[r * 4 + c] + 128 * suma[i + r], sqa[i + r], sqb[j + c], out32, out64,
                (i + r) * ldo + j + c);
      }
}

#pragma GCC pop_options

static int has_vnni = -1;

const char *tl_pair_u8_isa(void) {
  if (has_vnni < 0) {
    __builtin_cpu_init();
    has_vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  }
  return has_vnni ? "avx512vnni" : "scalar";
}

void tl_pair_u8(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, float *out32, double *out64,
                int64_t ldo) {
  tl_pair_u8_isa();
  if (has_vnni) {
    pairs_vnni(m, n, d, a, lda, b, ldb, metric, suma, sqa, sqb, out32, out64, ldo);
    return;
  }
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      const int64_t s = metric == TL_U8_L1 ? l1_scalar(a + i * lda, b + j * ldb, d) : dot_scalar(a + i * lda, b + j * ldb, d);
      put(metric, s, sqa[i], sqb[j], out32, out64, i * ldo + j);
    }
}

int tl_pair_u8_limit(int vnni) {
  tl_pair_u8_isa();
  int before = has_vnni;
  if (!vnni) has_vnni = 0;
  else {
    has_vnni = -1;
    tl_pair_u8_isa();
  }
  return before;
}
