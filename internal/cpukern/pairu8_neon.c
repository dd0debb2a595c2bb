// Pairwise affinities of 8-bit images, exactly, on arm64 (NEON): the
// arm64 twin of pairu8.c's AVX-512 VNNI kernels, with the same results
// bit for bit (every sum is exact in integers; only the final conversion
// rounds, as there).
//
// Dot products (dot, l2, cosine), on CPUs with the dot-product
// instructions (UDOT, Armv8.2's FEAT_DotProd, found at run time in
// AT_HWCAP): a register-blocked matrix product. a's MR rows and b's NR
// columns are packed in groups of 4 bytes, so that one vector holds one
// group of 4 rows (of a) or 4 columns (of b); one UDOT by element
// multiplies a group of 4 columns by one row's 4 bytes, taken from a lane
// of a's vector, summing into the 4 columns' uint32 lanes. The MR×NR =
// 8×12 tile of sums takes 24 registers; per group (4 bytes of k) 2 + 3
// vector loads feed 24 UDOTs. Unsigned bytes need no shift (VNNI's
// vpdpbusd multiplies unsigned by signed). A lane adds at most 4·255² per
// UDOT, so the uint32 sums are moved to int64 every KG groups.
//
// Without UDOT, and for L1 everywhere: 4×4 tiles of pairs, 16 bytes of k
// at a time: dot from widening multiplies (UMULL) added pairwise into
// uint32 lanes (UADALP); L1 from absolute differences accumulated in
// uint16 lanes (UABAL) and moved to int64 every 128 steps.
#if defined(__aarch64__)
#include "pairu8.h"
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

#define MR 8
#define NR 12
#define NC 120    // columns per packed block of b: NC·d bytes
#define KG 16384  // groups of 4 bytes between moves of the uint32 sums to int64: 4·255²·KG < 2³²
#define KV 16384  // 16-byte steps between moves of UMULL/UADALP's uint32 sums: 4·255²·KV < 2³²
#define KL 128    // 16-byte steps between moves of UABAL's uint16 sums: 2·255·KL < 2¹⁶

// The kernels in use: 2 with UDOT where the CPU has it, 1 plain NEON, 0
// none (tl_pair_u8_neon returns -1 and pairu8.c's portable loops run); -1
// until first asked.
static int level = -1;

static int cpu_level(void) {
#if defined(__ARM_FEATURE_DOTPROD) // built for CPUs that have it
  return 2;
#elif defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ? 2 : 1;
#else
  return 1;
#endif
}

int tl_pair_u8_neon_limit(int lvl) {
  if (level < 0) level = cpu_level();
  const int before = level, top = cpu_level();
  level = lvl < 0 ? 0 : lvl > top ? top : lvl;
  return before;
}

static int get_level(void) {
  int v = __atomic_load_n(&level, __ATOMIC_RELAXED);
  if (v < 0) {
    v = cpu_level();
    __atomic_store_n(&level, v, __ATOMIC_RELAXED);
  }
  return v;
}

int tl_pair_u8_neon_level(void) { return get_level(); }

#include "pairu8_put.h" // dst_t, value, store and put, as pairu8.c

// tr4 transposes the 4×4 block of 32-bit words in r.
static inline __attribute__((always_inline)) void tr4(uint32x4_t r[4]) {
  const uint32x4_t t0 = vtrn1q_u32(r[0], r[1]), t1 = vtrn2q_u32(r[0], r[1]);
  const uint32x4_t t2 = vtrn1q_u32(r[2], r[3]), t3 = vtrn2q_u32(r[2], r[3]);
  r[0] = vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2)));
  r[1] = vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3)));
  r[2] = vreinterpretq_u32_u64(vtrn2q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2)));
  r[3] = vreinterpretq_u32_u64(vtrn2q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3)));
}

// pack packs rows [0, w) of x (d bytes each, stride ld; rows at or past
// rows zero) in groups of 4 bytes: dst[q*w*4 + r*4 + t] = x[r*ld + 4q +
// t], the bytes past d zero; ceil(d/4) groups. w is a multiple of 4.
static void pack(const uint8_t *x, int64_t ld, int64_t rows, int64_t d, int w, uint8_t *dst) {
  const int64_t g = (d + 3) / 4;
  for (int r0 = 0; r0 < w; r0 += 4) {
    const uint8_t *src[4];
    for (int i = 0; i < 4; i++) src[i] = r0 + i < rows ? x + (r0 + i) * ld : NULL;
    for (int64_t q = 0; q < g; q += 4) { // 16 bytes of each row
      uint32x4_t r[4];
      for (int i = 0; i < 4; i++) {
        if (!src[i]) {
          r[i] = vdupq_n_u32(0);
        } else if (4 * q + 16 <= d) {
          r[i] = vreinterpretq_u32_u8(vld1q_u8(src[i] + 4 * q));
        } else {
          uint8_t tail[16] = {0};
          memcpy(tail, src[i] + 4 * q, (size_t)(d - 4 * q));
          r[i] = vreinterpretq_u32_u8(vld1q_u8(tail));
        }
      }
      tr4(r);
      for (int t = 0; t < 4 && q + t < g; t++) vst1q_u32((uint32_t *)(dst + (q + t) * w * 4 + r0 * 4), r[t]);
    }
  }
}

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")

// udot_tile adds to t the exact sums Σ a_r·b_c over the g groups of the
// packed panels pa (MR rows) and pb (NR columns).
static __attribute__((noinline)) void udot_tile(const uint8_t *restrict pa, const uint8_t *restrict pb, int64_t g,
                                                int64_t t[MR][NR]) {
  for (int64_t g0 = 0; g0 < g; g0 += KG) {
    const int64_t g1 = g - g0 < KG ? g : g0 + KG;
#define ROW(r) uint32x4_t c##r##0 = vdupq_n_u32(0), c##r##1 = c##r##0, c##r##2 = c##r##0;
    ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
#define DOT(r, a, l)                                                                                                   \
  c##r##0 = vdotq_laneq_u32(c##r##0, b0, a, l), c##r##1 = vdotq_laneq_u32(c##r##1, b1, a, l),                         \
  c##r##2 = vdotq_laneq_u32(c##r##2, b2, a, l);
#pragma GCC unroll 1
    for (int64_t q = g0; q < g1; q++) {
      const uint8x16_t a0 = vld1q_u8(pa + q * MR * 4), a1 = vld1q_u8(pa + q * MR * 4 + 16);
      const uint8x16_t b0 = vld1q_u8(pb + q * NR * 4), b1 = vld1q_u8(pb + q * NR * 4 + 16),
                       b2 = vld1q_u8(pb + q * NR * 4 + 32);
      DOT(0, a0, 0) DOT(1, a0, 1) DOT(2, a0, 2) DOT(3, a0, 3) DOT(4, a1, 0) DOT(5, a1, 1) DOT(6, a1, 2) DOT(7, a1, 3)
    }
#undef DOT
#define OUT(r)                                                                                                         \
  {                                                                                                                    \
    uint32_t s[NR];                                                                                                    \
    vst1q_u32(s, c##r##0), vst1q_u32(s + 4, c##r##1), vst1q_u32(s + 8, c##r##2);                                       \
    for (int c = 0; c < NR; c++) t[r][c] += s[c];                                                                      \
  }
    OUT(0) OUT(1) OUT(2) OUT(3) OUT(4) OUT(5) OUT(6) OUT(7)
#undef OUT
  }
}

#pragma GCC pop_options

// dots_udot: the dot-product metrics of rows a (m) against b (n), b
// packed NC columns at a time, a MR rows at a time; -1 when the packing
// buffers cannot be had.
static int dots_udot(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                     int metric, const int64_t *sqa, const int64_t *sqb, dst_t *o) {
  const int64_t g = (d + 3) / 4;
  uint8_t *bp = (uint8_t *)malloc((size_t)g * NC * 4), *ap = (uint8_t *)malloc((size_t)g * MR * 4);
  if (!bp || !ap) {
    free(bp);
    free(ap);
    return -1;
  }
  for (int64_t jb = 0; jb < n; jb += NC) {
    const int64_t nc = n - jb < NC ? n - jb : NC;
    for (int64_t j = 0; j < nc; j += NR) pack(b + (jb + j) * ldb, ldb, nc - j, d, NR, bp + j * g * 4);
    for (int64_t i = 0; i < m; i += MR) {
      const int64_t mr = m - i < MR ? m - i : MR;
      pack(a + i * lda, lda, mr, d, MR, ap);
      for (int64_t j = 0; j < nc; j += NR) {
        int64_t t[MR][NR] = {{0}};
        udot_tile(ap, bp + j * g * 4, g, t);
        for (int64_t r = 0; r < mr; r++)
          for (int64_t c = 0; c < NR && j + c < nc; c++) put(metric, t[r][c], sqa[i + r], sqb[jb + j + c], o, i + r, jb + j + c);
      }
    }
  }
  free(bp);
  free(ap);
  return 0;
}

// tile4 sets v[r*4+c] to Σ a_r·b_c (dot) or Σ |a_r − b_c| (l1) for rows
// a_r = a + r·lda, b_c = b + c·ldb, r < mr, c < nc (≤ 4), with plain NEON;
// rows past mr or nc read row 0 and are not stored. Compiled without
// GCC's first scheduling pass, which otherwise spills accumulators.
static __attribute__((noinline, optimize("no-schedule-insns"))) void tile4(const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb, int64_t d, int mr, int nc, int l1,
                  int64_t v[16]) {
  const uint8_t *ra[4], *rb[4];
  for (int i = 0; i < 4; i++) ra[i] = a + (i < mr ? i : 0) * lda, rb[i] = b + (i < nc ? i : 0) * ldb;
  for (int i = 0; i < 16; i++) v[i] = 0;
  const int64_t full = d / 16 * 16, step = l1 ? KL : KV;
  for (int64_t k0 = 0; k0 < full; k0 += step * 16) {
    const int64_t k1 = full - k0 < step * 16 ? full : k0 + step * 16;
    if (l1) {
      uint16x8_t acc[4][4];
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = vdupq_n_u16(0);
      for (int64_t k = k0; k < k1; k += 16) {
        uint8x16_t va[4], vb[4];
        for (int r = 0; r < 4; r++) va[r] = vld1q_u8(ra[r] + k), vb[r] = vld1q_u8(rb[r] + k);
        for (int r = 0; r < 4; r++)
          for (int c = 0; c < 4; c++) {
            acc[r][c] = vabal_u8(acc[r][c], vget_low_u8(va[r]), vget_low_u8(vb[c]));
            acc[r][c] = vabal_high_u8(acc[r][c], va[r], vb[c]);
          }
      }
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) v[r * 4 + c] += vaddlvq_u16(acc[r][c]);
    } else {
      uint32x4_t acc[4][4];
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = vdupq_n_u32(0);
      for (int64_t k = k0; k < k1; k += 16) {
        uint8x16_t va[4], vb[4];
        for (int r = 0; r < 4; r++) va[r] = vld1q_u8(ra[r] + k), vb[r] = vld1q_u8(rb[r] + k);
        for (int r = 0; r < 4; r++)
          for (int c = 0; c < 4; c++) {
            acc[r][c] = vpadalq_u16(acc[r][c], vmull_u8(vget_low_u8(va[r]), vget_low_u8(vb[c])));
            acc[r][c] = vpadalq_u16(acc[r][c], vmull_high_u8(va[r], vb[c]));
          }
      }
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) v[r * 4 + c] += vaddlvq_u32(acc[r][c]);
    }
  }
  for (int r = 0; r < 4; r++) // the last d % 16 bytes
    for (int c = 0; c < 4; c++)
      for (int64_t k = full; k < d; k++) {
        const int x = ra[r][k], y = rb[c][k];
        v[r * 4 + c] += l1 ? (x > y ? x - y : y - x) : x * y;
      }
}

static void pairs_neon(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                       int metric, const int64_t *sqa, const int64_t *sqb, dst_t *o) {
  const int l1 = metric == TL_U8_L1;
  int64_t v[16];
  for (int64_t jb = 0; jb < n; jb += 64) // column blocks that stay in L2
    for (int64_t i = 0; i < m; i += 4)
      for (int64_t j = jb; j < jb + 64 && j < n; j += 4) {
        const int mr = m - i < 4 ? (int)(m - i) : 4, nc = n - j < 4 ? (int)(n - j) : 4;
        tile4(a + i * lda, lda, b + j * ldb, ldb, d, mr, nc, l1, v);
        for (int r = 0; r < mr; r++)
          for (int c = 0; c < nc; c++) put(metric, v[r * 4 + c], sqa[i + r], sqb[j + c], o, i + r, j + c);
      }
}

int tl_pair_u8_neon(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                    int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, void *out, void *tout,
                    int type, int64_t ldo, int64_t tj, int64_t sum[2]) {
  const int lvl = get_level();
  if (lvl == 0) return -1;
  dst_t o = {out, tout, ldo, tj, type, 0};
  if (lvl < 2 || metric == TL_U8_L1 || dots_udot(m, n, d, a, lda, b, ldb, metric, sqa, sqb, &o) != 0)
    pairs_neon(m, n, d, a, lda, b, ldb, metric, sqa, sqb, &o);
  if (sum) {
    sum[0] = (int64_t)(uint64_t)(unsigned __int128)o.sum;
    sum[1] = (int64_t)(o.sum >> 64);
  }
  return 0;
}

int tl_u8_sums_neon(const uint8_t *x, int64_t n, int64_t d, int64_t *sum, int64_t *sq) {
  if (get_level() == 0) return -1;
  const int64_t full = d / 16 * 16;
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *r = x + i * d;
    int64_t s = 0, q = 0;
    for (int64_t k0 = 0; k0 < full; k0 += KL * 16) { // Σx: uint16 lanes add 2·255 a step
      const int64_t k1 = full - k0 < KL * 16 ? full : k0 + KL * 16;
      uint16x8_t acc = vdupq_n_u16(0);
      for (int64_t k = k0; k < k1; k += 16) acc = vpadalq_u8(acc, vld1q_u8(r + k));
      s += vaddlvq_u16(acc);
    }
    for (int64_t k0 = 0; k0 < full; k0 += KV * 16) { // Σx²: uint32 lanes add 4·255² a step
      const int64_t k1 = full - k0 < KV * 16 ? full : k0 + KV * 16;
      uint32x4_t acc = vdupq_n_u32(0);
      for (int64_t k = k0; k < k1; k += 16) {
        const uint8x16_t v = vld1q_u8(r + k);
        acc = vpadalq_u16(acc, vmull_u8(vget_low_u8(v), vget_low_u8(v)));
        acc = vpadalq_u16(acc, vmull_high_u8(v, v));
      }
      q += vaddlvq_u32(acc);
    }
    for (int64_t k = full; k < d; k++) s += r[k], q += (int64_t)r[k] * r[k];
    sum[i] = s, sq[i] = q;
  }
  return 0;
}
#endif
