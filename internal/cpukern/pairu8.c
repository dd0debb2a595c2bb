// Pairwise affinities of 8-bit images, exactly, in integers: dot products
// and squared L2 distances from Σ a·b (AVX-512 VNNI: vpdpbusd multiplies
// unsigned by signed bytes, so b is shifted to signed, b − 128, and 128·Σa
// added back), L1 distances from Σ |a − b| (vpsadbw). Sums are exact in
// int64 whatever the order, so results do not depend on blocking; they are
// converted to the output's float type only at the end (cosine: the exact
// dot product over the exact norms, in double). arm64 has its own kernels,
// in pairu8_neon.c, with the same results.
#include "pairu8.h"
#include "isa.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The largest k block whose int32 lane sums cannot overflow: a lane adds
// at most 4·255·128 per 64 bytes.
#define KB (1 << 19)

#include "pairu8_put.h"

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

#if TL_X86 // the VNNI kernels
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")

// The dot products (dot, l2, cosine) run as a register-blocked matrix
// product: the NR columns of a block of b are packed in groups of 4 bytes,
// column after column (bp[g*NR*4 + c*4 + t] = b[c, 4g+t] − 128, as signed
// bytes), so that one vpdpbusd multiplies 4 bytes of a row of a, broadcast,
// with 4 bytes of each of 16 columns, summing into their 16 int32 lanes.
// The micro-kernel holds an MR×NR tile of sums in 2·MR registers over the
// whole k axis, reading a's rows in place. A lane adds at most
// 4·255·128 per group, so the int32 sums are moved to int64 every KG
// groups.
#define MR 12
#define NR 32
#define NC 128 // columns per packed block of b: NC·d bytes, in L2 for d up to ~12k
#define KG 16384

// transpose16 transposes the 16×16 matrix of 32-bit words r (row i in
// r[i]): 32-bit and 64-bit unpacks transpose the 4×4 blocks within each
// 128-bit lane, then two rounds of lane shuffles put the blocks in place.
static inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // u[4i + k], lane l: rows 4i…4i+3 of column 4l + k.
  for (int k = 0; k < 4; k++) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x44), v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xEE);
    const __m512i w0 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x44),
                  w1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xEE);
    r[k] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    r[4 + k] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    r[8 + k] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    r[12 + k] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
}

// pack_b packs columns [0, nc) of b (nc ≤ NC, d bytes each) into bp as
// ceil(nc/NR) panels of ceil(d/4) groups; missing columns and the bytes
// past d are −128 (b = 0; a's bytes there are 0 anyway). Sixteen columns
// by sixteen groups at a time, the 4-byte groups are a 16×16 matrix of
// 32-bit words to transpose.
static void pack_b(const uint8_t *b, int64_t ldb, int64_t nc, int64_t d, uint8_t *bp) {
  const int64_t g = (d + 3) / 4, full = d / 4, full16 = full / 16 * 16;
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  for (int64_t j = 0; j < nc; j += NR) {
    uint8_t *p = bp + (j / NR) * g * NR * 4;
    for (int64_t c0 = 0; c0 < NR; c0 += 16)
      for (int64_t q = 0; q < full16; q += 16) {
        __m512i r[16];
        for (int i = 0; i < 16; i++)
          r[i] = j + c0 + i < nc ? _mm512_xor_si512(_mm512_loadu_si512(b + (j + c0 + i) * ldb + q * 4), flip) : flip;
        transpose16(r);
        for (int k = 0; k < 16; k++) _mm512_store_si512(p + (q + k) * NR * 4 + c0 * 4, r[k]);
      }
    for (int64_t c = 0; c < NR; c++) { // the groups past the last 16
      const uint8_t *col = b + (j + c) * ldb;
      for (int64_t q = full16; q < g; q++) {
        uint32_t w = 0;
        for (int t = 0; t < 4; t++)
          w |= (uint32_t)(j + c < nc && 4 * q + t < d ? col[4 * q + t] ^ 0x80 : 0x80) << (8 * t);
        *(uint32_t *)(p + q * NR * 4 + c * 4) = w;
      }
    }
  }
}

// emit_tile stores the metric of the exact sums t of a micro tile (mr
// rows from row i of the call, nc columns from column j) where o says:
// each row's values 8 at a time, then their transposes, and adds up the
// integer values into o->sum.
static void emit_tile(int metric, int64_t t[MR][NR], int64_t mr, int64_t nc, const int64_t *sqa, const int64_t *sqb,
                      dst_t *o, int64_t i, int64_t j) {
  const int cosine = metric == TL_U8_COSINE;
  const int64_t tj = o->tout ? o->tj - j : NR; // columns from tj on are stored transposed too
  __m512i acc = _mm512_setzero_si512();
  for (int64_t r = 0; r < mr; r++) {
    const int64_t at = (i + r) * o->ldo + j;
    for (int64_t q = 0; q * 8 < nc; q++) {
      const int nq = nc - q * 8 < 8 ? (int)(nc - q * 8) : 8;
      const __mmask8 k = (__mmask8)((1u << nq) - 1);
      const __m512i s = _mm512_loadu_si512(t[r] + q * 8), sb = _mm512_maskz_loadu_epi64(k, sqb + q * 8);
      __m512i v = s;
      __m512d f;
      if (cosine)
        f = _mm512_div_pd(_mm512_cvtepi64_pd(s),
                          _mm512_mul_pd(_mm512_set1_pd(sqrt((double)sqa[r])), _mm512_sqrt_pd(_mm512_cvtepi64_pd(sb))));
      else {
        if (metric == TL_U8_L1) v = _mm512_sub_epi64(_mm512_setzero_si512(), s);
        if (metric == TL_U8_L2) // −(sa + sb − 2s), exact in int64
          v = _mm512_sub_epi64(_mm512_slli_epi64(s, 1), _mm512_add_epi64(_mm512_set1_epi64(sqa[r]), sb));
        f = _mm512_cvtepi64_pd(v);
        acc = _mm512_mask_add_epi64(acc, k, acc, v);
        const __mmask8 kt = _mm512_mask_cmpge_epi64_mask(
            k, _mm512_add_epi64(_mm512_set1_epi64(q * 8), _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0)), _mm512_set1_epi64(tj));
        acc = _mm512_mask_add_epi64(acc, kt, acc, v);
      }
      switch (o->type) {
      case TL_OUT_F32: _mm256_mask_storeu_ps((float *)o->out + at + q * 8, k, _mm512_cvtpd_ps(f)); break;
      case TL_OUT_F64: _mm512_mask_storeu_pd((double *)o->out + at + q * 8, k, f); break;
      case TL_OUT_I32: _mm256_mask_storeu_epi32((int32_t *)o->out + at + q * 8, k, _mm512_cvtepi64_epi32(v)); break;
      default: _mm512_mask_storeu_epi64((int64_t *)o->out + at + q * 8, k, v);
      }
    }
  }
  o->sum += _mm512_reduce_add_epi64(acc);
  // The transposes: row j+c of tout gets the tile's column c, mr values
  // from column i on.
  for (int64_t c = tj > 0 ? tj : 0; c < nc; c++)
    for (int64_t r = 0; r < mr; r++) {
      const int64_t v = cosine ? 0 : value(metric, t[r][c], sqa[r], sqb[c]);
      const double f = cosine ? (double)t[r][c] / (sqrt((double)sqa[r]) * sqrt((double)sqb[c])) : 0;
      store(o->type, o->tout, (j + c) * o->ldo + i + r, v, f, cosine);
    }
}

// group_sums adds to acc (MR×NR int32, row-major) the sums over groups
// [q0, q1) of MR rows of a (group q of row r at row[r] + gs·q, all groups
// whole) with the packed panel p (at group q0). The accumulators are 24
// named registers. (GCC's partial redundancy elimination would copy them
// to the stack on every group.)
__attribute__((optimize("no-tree-pre"))) static void group_sums(const uint8_t *const row[MR], int64_t gs,
                                                                const uint8_t *p, int64_t q0, int64_t q1,
                                                                int32_t *acc) {
#define ACC(r) __m512i c##r##0 = _mm512_setzero_si512(), c##r##1 = _mm512_setzero_si512();
  ACC(0) ACC(1) ACC(2) ACC(3) ACC(4) ACC(5) ACC(6) ACC(7) ACC(8) ACC(9) ACC(10) ACC(11)
#undef ACC
  const uint8_t *a0 = row[0], *a1 = row[1], *a2 = row[2], *a3 = row[3], *a4 = row[4], *a5 = row[5], *a6 = row[6],
                *a7 = row[7], *a8 = row[8], *a9 = row[9], *a10 = row[10], *a11 = row[11];
  for (int64_t q = q0; q < q1; q++, p += NR * 4) {
    const __m512i b0 = _mm512_load_si512(p), b1 = _mm512_load_si512(p + 64);
    __m512i x;
#define ROW(r)                                                                                                        \
  x = _mm512_set1_epi32(*(const int32_t *)(a##r + gs * q));                                                           \
  c##r##0 = _mm512_dpbusd_epi32(c##r##0, x, b0), c##r##1 = _mm512_dpbusd_epi32(c##r##1, x, b1);
    ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7) ROW(8) ROW(9) ROW(10) ROW(11)
#undef ROW
  }
#define OUT(r)                                                                                                        \
  _mm512_storeu_si512(acc + r * NR, _mm512_add_epi32(_mm512_loadu_si512(acc + r * NR), c##r##0));                     \
  _mm512_storeu_si512(acc + r * NR + 16, _mm512_add_epi32(_mm512_loadu_si512(acc + r * NR + 16), c##r##1));
  OUT(0) OUT(1) OUT(2) OUT(3) OUT(4) OUT(5) OUT(6) OUT(7) OUT(8) OUT(9) OUT(10) OUT(11)
#undef OUT
}

// micro computes the sums of rows a (mr ≤ MR, rows i… of the call) with
// the NR packed columns bp (nc ≤ NR valid, columns j… of the call) and
// stores their metric where o says. Row r of a is at a + r·lda, its group
// q (4 bytes) at gs·q from there: in place (lda the image stride, gs 4),
// or a packed panel (pack_a: lda 4, gs MR·4, every group whole).
static void micro(const uint8_t *a, int64_t lda, int64_t gs, int64_t mr, const uint8_t *bp, int64_t nc, int64_t d,
                  int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, dst_t *o, int64_t i,
                  int64_t j) {
  const int64_t g = (d + 3) / 4, full = gs == 4 ? d / 4 : g;
  const uint8_t *row[MR];
  for (int r = 0; r < MR; r++) row[r] = a + (r < mr || gs != 4 ? r : 0) * lda; // rows past mr: not stored
  int64_t t[MR][NR];                                                            // exact sums
  for (int r = 0; r < MR; r++)
    for (int c = 0; c < NR; c++) t[r][c] = 128 * suma[r < mr ? r : 0];
  for (int64_t g0 = 0; g0 < g; g0 += KG) {
    const int64_t g1 = g - g0 < KG ? g : g0 + KG, q1 = g1 < full ? g1 : full;
    int32_t acc[MR][NR] __attribute__((aligned(64))) = {{0}};
    group_sums(row, gs, bp + g0 * NR * 4, g0, q1, &acc[0][0]);
    if (q1 < g1) { // the last, partial group in place: a's bytes past d are 0
      const __m512i b0 = _mm512_load_si512(bp + q1 * NR * 4), b1 = _mm512_load_si512(bp + q1 * NR * 4 + 64);
      for (int r = 0; r < MR; r++) {
        uint32_t w = 0;
        for (int64_t k = 4 * q1; k < d; k++) w |= (uint32_t)row[r][k] << (8 * (k - 4 * q1));
        const __m512i x = _mm512_set1_epi32((int32_t)w);
        _mm512_store_si512(acc[r], _mm512_dpbusd_epi32(_mm512_load_si512(acc[r]), x, b0));
        _mm512_store_si512(acc[r] + 16, _mm512_dpbusd_epi32(_mm512_load_si512(acc[r] + 16), x, b1));
      }
    }
    for (int r = 0; r < MR; r++)
      for (int c = 0; c < NR; c++) t[r][c] += acc[r][c];
  }
  emit_tile(metric, t, mr, nc, sqa, sqb, o, i, j);
}

// pack_a packs rows [0, m) of a (d bytes each) as ceil(m/MR) panels of
// ceil(d/4) groups, each group the panel's MR rows' 4 bytes, one row after
// another (ap[p*g*MR*4 + q*MR*4 + r*4 + t] = a[p*MR + r, 4q + t]); rows
// past m and the bytes past d are 0, so they add nothing. Read in place,
// a panel's rows lie d bytes apart, which on a d of 4 KiB puts all of
// them in the same sets of the L1 cache.
static void pack_a(const uint8_t *a, int64_t lda, int64_t m, int64_t d, uint8_t *ap) {
  const int64_t g = (d + 3) / 4, full = d / 4, full16 = full / 16 * 16;
  for (int64_t i = 0; i < m; i += MR) {
    uint8_t *p = ap + (i / MR) * g * MR * 4;
    for (int64_t q = 0; q < full16; q += 16) { // 16 groups of the MR rows, as a 16×16 transpose
      __m512i r[16];
      for (int k = 0; k < 16; k++)
        r[k] = k < MR && i + k < m ? _mm512_loadu_si512(a + (i + k) * lda + q * 4) : _mm512_setzero_si512();
      transpose16(r);
      for (int k = 0; k < 16; k++) _mm512_mask_storeu_epi32(p + (q + k) * MR * 4, (1u << MR) - 1, r[k]);
    }
    for (int64_t r = 0; r < MR; r++) { // the groups past the last 16
      uint8_t *dst = p + r * 4;
      if (i + r >= m) {
        for (int64_t q = full16; q < g; q++) memset(dst + q * MR * 4, 0, 4);
        continue;
      }
      const uint8_t *row = a + (i + r) * lda;
      int64_t q = full16;
      for (; q < full; q++) memcpy(dst + q * MR * 4, row + 4 * q, 4);
      for (; q < g; q++) {
        uint8_t w[4] = {0, 0, 0, 0};
        for (int64_t k = 4 * q; k < d; k++) w[k - 4 * q] = row[k];
        memcpy(dst + q * MR * 4, w, 4);
      }
    }
  }
}

// The scratch of dots_vnni: the packed block of b, and the packed rows of
// a when they take at most APACK bytes (else a is read in place).
#define APACK ((int64_t)8 << 20)
static int64_t bpack_bytes(int64_t d) { return (NC / NR) * ((d + 3) / 4) * NR * 4; }
static int64_t apack_bytes(int64_t m, int64_t d) {
  const int64_t n = (m + MR - 1) / MR * ((d + 3) / 4) * MR * 4;
  return n <= APACK ? n : 0;
}

// dots_vnni: the dot-product metrics of rows a (m) against b (n), with b
// packed NC columns at a time and a packed once (apack_bytes), in scratch
// (64-byte aligned, of tl_pair_u8_scratch bytes) or, when that is NULL, in
// memory of its own; -1 when that cannot be had.
static int dots_vnni(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                     int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, dst_t *o,
                     uint8_t *scratch) {
  const int64_t g = (d + 3) / 4, nb = bpack_bytes(d), na = apack_bytes(m, d);
  uint8_t *own = NULL;
  // aligned_alloc wants a multiple of the alignment.
  if (!scratch && !(scratch = own = (uint8_t *)aligned_alloc(64, (size_t)(nb + na + 63) / 64 * 64))) return -1;
  uint8_t *bp = scratch, *ap = na ? scratch + nb : NULL;
  if (ap) pack_a(a, lda, m, d, ap);
  for (int64_t jb = 0; jb < n; jb += NC) {
    const int64_t nc = n - jb < NC ? n - jb : NC;
    pack_b(b + jb * ldb, ldb, nc, d, bp);
    for (int64_t i = 0; i < m; i += MR)
      for (int64_t j = 0; j < nc; j += NR) {
        const int64_t mr = m - i < MR ? m - i : MR, cj = nc - j < NR ? nc - j : NR;
        const uint8_t *pj = bp + (j / NR) * g * NR * 4;
        if (ap)
          micro(ap + (i / MR) * g * MR * 4, 4, MR * 4, mr, pj, cj, d, metric, suma + i, sqa + i, sqb + jb + j, o, i,
                jb + j);
        else
          micro(a + i * lda, lda, 4, mr, pj, cj, d, metric, suma + i, sqa + i, sqb + jb + j, o, i, jb + j);
      }
  }
  free(own);
  return 0;
}

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
                       int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, dst_t *o) {
  const int sad = metric == TL_U8_L1;
  int64_t v[16];
  for (int64_t jb = 0; jb < n; jb += 64) // column blocks that stay in L2
    for (int64_t i = 0; i < m; i += 4)
      for (int64_t j = jb; j < jb + 64 && j < n; j += 4) {
        const int mr = m - i < 4 ? (int)(m - i) : 4, nc = n - j < 4 ? (int)(n - j) : 4;
        tile_vnni(a + i * lda, lda, b + j * ldb, ldb, d, mr, nc, sad, v);
        for (int r = 0; r < mr; r++)
          for (int c = 0; c < nc; c++)
            put(metric, sad ? v[r * 4 + c] : v[r * 4 + c] + 128 * suma[i + r], sqa[i + r], sqb[j + c], o, i + r, j + c);
      }
}

// sums_vnni sets sum[i] = Σ x[i, k] and sq[i] = Σ x[i, k]² for n rows of d
// bytes: vpsadbw against zero for the sums, and Σ x·(x − 128) + 128·Σ x
// by vpdpbusd for the squares (a lane adds at most 4·255·127 per 64
// bytes, so the int32 lanes are moved to int64 every KB bytes).
static void sums_vnni(const uint8_t *x, int64_t n, int64_t d, int64_t *sum, int64_t *sq) {
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *r = x + i * d;
    __m512i s = _mm512_setzero_si512();
    int64_t q = 0;
    for (int64_t k0 = 0; k0 < d; k0 += KB) {
      const int64_t k1 = d - k0 < KB ? d : k0 + KB;
      __m512i acc = _mm512_setzero_si512();
      for (int64_t k = k0; k < k1; k += 64) {
        const __mmask64 m = k1 - k >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (k1 - k)) - 1);
        const __m512i v = _mm512_maskz_loadu_epi8(m, r + k);
        s = _mm512_add_epi64(s, _mm512_sad_epu8(v, _mm512_setzero_si512()));
        acc = _mm512_dpbusd_epi32(acc, v, _mm512_maskz_mov_epi8(m, _mm512_xor_si512(v, flip)));
      }
      q += lanes64(acc);
    }
    sum[i] = _mm512_reduce_add_epi64(s);
    sq[i] = q + 128 * sum[i];
  }
}

#pragma GCC pop_options
#endif

static int has_vnni = -1;

// detect_vnni sets has_vnni, once, from what the CPU has: the VNNI path
// or the portable loops, the selector below choosing by it. (x86-64 only:
// elsewhere the portable loops, which the compiler vectorises.)
static void detect_vnni(void) {
  if (has_vnni < 0) {
#if TL_X86
    __builtin_cpu_init();
    has_vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
    has_vnni = 0;
#endif
  }
}

void tl_pair_u8(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, void *out, void *tout, int type,
                int64_t ldo, int64_t tj, int64_t sum[2], void *scratch) {
#if defined(__aarch64__)
  if (tl_pair_u8_neon(m, n, d, a, lda, b, ldb, metric, suma, sqa, sqb, out, tout, type, ldo, tj, sum) == 0) return;
#endif
  dst_t o = {out, tout, ldo, tj, type, 0};
  detect_vnni();
#if TL_X86
  if (has_vnni && metric != TL_U8_L1 &&
      dots_vnni(m, n, d, a, lda, b, ldb, metric, suma, sqa, sqb, &o, (uint8_t *)scratch) == 0)
    goto done;
  if (has_vnni) {
    pairs_vnni(m, n, d, a, lda, b, ldb, metric, suma, sqa, sqb, &o);
    goto done;
  }
#endif
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      const int64_t s = metric == TL_U8_L1 ? l1_scalar(a + i * lda, b + j * ldb, d) : dot_scalar(a + i * lda, b + j * ldb, d);
      put(metric, s, sqa[i], sqb[j], &o, i, j);
    }
#if TL_X86
done:
#endif
  if (sum) {
    sum[0] = (int64_t)(uint64_t)(unsigned __int128)o.sum;
    sum[1] = (int64_t)(o.sum >> 64);
  }
}

void tl_u8_sums(const uint8_t *x, int64_t n, int64_t d, int64_t *sum, int64_t *sq) {
#if defined(__aarch64__)
  if (tl_u8_sums_neon(x, n, d, sum, sq) == 0) return;
#endif
  detect_vnni();
#if TL_X86
  if (has_vnni) {
    sums_vnni(x, n, d, sum, sq);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) {
    int64_t s = 0, q = 0;
    for (int64_t k = 0; k < d; k++) {
      s += x[i * d + k];
      q += (int64_t)x[i * d + k] * x[i * d + k];
    }
    sum[i] = s, sq[i] = q;
  }
}

int64_t tl_pair_u8_scratch(int64_t m, int64_t d, int metric) {
  detect_vnni();
#if TL_X86
  if (has_vnni && metric != TL_U8_L1 && m > 0 && d > 0) return bpack_bytes(d) + apack_bytes(m, d);
#else
  (void)m, (void)d, (void)metric;
#endif
  return 0;
}

int tl_pair_u8_vnni(void) {
  detect_vnni();
  return has_vnni;
}

int tl_pair_u8_limit(int vnni) {
#if defined(__aarch64__) // the NEON kernels of pairu8_neon.c, or none
  return tl_pair_u8_neon_limit(vnni ? 2 : 0) > 0;
#endif
  detect_vnni();
  int before = has_vnni;
  if (!vnni) has_vnni = 0;
  else {
    has_vnni = -1;
    detect_vnni();
  }
  return before;
}
