// The packed matrix product of gemm.c (out = a·bᵀ, float32) on arm64, with
// Advanced SIMD (NEON, part of every AArch64 CPU): the same entry points,
// packed layouts and order of sums, with a register tile that fits NEON's
// 32 128-bit registers.
//
// The micro-kernel keeps an MR×NR = 8×12 tile of out in 24 registers
// (three 4-lane vectors per row of a). Per k it loads a's 8 values (two
// vectors) and b's 12 (three), and issues 24 fused multiply-adds by
// element (FMLA v.4s, v.4s, v.s[lane]): each row of a's value is taken
// from a lane of a's vectors, so there is no broadcast. 29 registers in
// use, 24 FMAs to 5 vector loads.
//
// Each pair's products are summed k by k within a slice of KC, from zero,
// with one rounding per step (fused), and each slice's sum added to out in
// slice order: the order gemm.c sums in on x86-64 with the same KC, so a
// pair's value is the same bit for bit on both, and does not depend on
// the tile, block or shard it sits in.
#if defined(__aarch64__)
#include "gemm.h"
#include <arm_neon.h>
#include <stdlib.h>
#include <string.h>

#define MR TL_GEMM_MR
#define NR TL_GEMM_NR
#define KC TL_GEMM_KC
#define NC TL_GEMM_NC

_Static_assert(MR == 8 && NR == 12, "gemm_neon.c: the micro-kernel is written for an 8×12 tile");

int tl_gemm_ok(void) { return 1; } // every AArch64 CPU has NEON

// tr4 transposes the 4×4 block r (r[i] lane j becomes r[j] lane i).
static inline __attribute__((always_inline)) void tr4(float32x4_t r[4]) {
  const float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
  const float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
  r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
  r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
  r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
  r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

// pack_panel packs values [k0, k0+kc) of rows [0, w) of x (stride ld)
// into dst, w values per k: dst[k*w + r] = x[r*ld + k0 + k], less mu[k0 +
// k] where mu is not NULL; rows at or past rows are zero. w is a multiple
// of 4.
static void pack_panel(const float *x, int64_t ld, const float *mu, int64_t rows, int64_t k0, int64_t kc, int w,
                       float *dst) {
  for (int r0 = 0; r0 < w; r0 += 4) {
    if (r0 >= rows) {
      for (int64_t k = 0; k < kc; k++) vst1q_f32(dst + k * w + r0, vdupq_n_f32(0));
      continue;
    }
    const float *src[4];
    for (int i = 0; i < 4; i++) src[i] = r0 + i < rows ? x + (r0 + i) * ld + k0 : NULL;
    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
      float32x4_t r[4];
      for (int i = 0; i < 4; i++) r[i] = src[i] ? vld1q_f32(src[i] + k) : vdupq_n_f32(0);
      if (mu) {
        const float32x4_t s = vld1q_f32(mu + k0 + k);
        for (int i = 0; i < 4; i++)
          if (src[i]) r[i] = vsubq_f32(r[i], s);
      }
      tr4(r);
      for (int t = 0; t < 4; t++) vst1q_f32(dst + (k + t) * w + r0, r[t]);
    }
    for (; k < kc; k++)
      for (int i = 0; i < 4; i++) dst[k * w + r0 + i] = src[i] ? (mu ? src[i][k] - mu[k0 + k] : src[i][k]) : 0;
  }
}

int tl_gemm_pack_a(int64_t m, int64_t d, const float *a, int64_t lda, const float *mu, int64_t p0, int64_t p1,
                   float *ap) {
  const int64_t am = (m + MR - 1) / MR * MR;
  // The bits of every packed value times zero, or-ed: ±0 for finite
  // values, a NaN (exponent all ones) for NaN and ±Inf.
  uint32x4_t seen = vdupq_n_u32(0);
  for (int64_t k0 = 0; k0 < d; k0 += KC) {
    const int64_t kc = d - k0 < KC ? d - k0 : KC;
    for (int64_t p = p0; p < p1; p++) {
      float *dst = ap + k0 * am + p * MR * kc;
      pack_panel(a + p * MR * lda, lda, mu, m - p * MR, k0, kc, MR, dst);
      for (int64_t i = 0; i < MR * kc; i += 4)
        seen = vorrq_u32(seen, vreinterpretq_u32_f32(vmulq_n_f32(vld1q_f32(dst + i), 0.0f)));
    }
  }
  const uint32x4_t exp = vdupq_n_u32(0x7f800000);
  return vmaxvq_u32(vceqq_u32(vandq_u32(seen, exp), exp)) != 0;
}

// micro computes the MR×NR tile of the packed panels pa and pb over kc and
// stores it to c (row stride ldc) when first, else adds it to c. It
// fetches pfa's first MR·kc values (a's next panel, or pa itself) into L2
// on the way, MR values a k.
static inline __attribute__((always_inline)) void micro(int64_t kc, const float *restrict pa, const float *restrict pb,
                                                        float *c, int64_t ldc, int first, const float *pfa) {
#define ROW(r) float32x4_t c##r##0 = vdupq_n_f32(0), c##r##1 = c##r##0, c##r##2 = c##r##0;
  ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
  if (!first)
    for (int r = 0; r < MR; r++) __builtin_prefetch(c + r * ldc, 1, 3), __builtin_prefetch(c + r * ldc + NR - 1, 1, 3);
  // One k: a's 8 values in a0 (rows 0-3) and a1 (rows 4-7), b's 12 in
  // b0-b2; row r's three accumulators take lane r%4 of a0 or a1.
#define FMA(r, a, l)                                                                                                   \
  c##r##0 = vfmaq_laneq_f32(c##r##0, b0, a, l), c##r##1 = vfmaq_laneq_f32(c##r##1, b1, a, l),                         \
  c##r##2 = vfmaq_laneq_f32(c##r##2, b2, a, l);
#define STEP(k)                                                                                                        \
  {                                                                                                                    \
    const float32x4_t a0 = vld1q_f32(pa + (k) * MR), a1 = vld1q_f32(pa + (k) * MR + 4);                                \
    const float32x4_t b0 = vld1q_f32(pb + (k) * NR), b1 = vld1q_f32(pb + (k) * NR + 4),                                \
                      b2 = vld1q_f32(pb + (k) * NR + 8);                                                               \
    FMA(0, a0, 0) FMA(1, a0, 1) FMA(2, a0, 2) FMA(3, a0, 3) FMA(4, a1, 0) FMA(5, a1, 1) FMA(6, a1, 2) FMA(7, a1, 3)    \
  }
  // One k per iteration: unrolled, the compiler runs short of registers
  // for the next k's loads and moves an accumulator back and forth.
#pragma GCC unroll 1
  for (int64_t k = 0; k < kc; k++) {
    __builtin_prefetch(pfa + k * MR, 0, 2);
    STEP(k)
  }
#undef STEP
#undef FMA
#define OUT(r)                                                                                                         \
  {                                                                                                                    \
    float *o = c + r * ldc;                                                                                            \
    if (first) {                                                                                                       \
      vst1q_f32(o, c##r##0), vst1q_f32(o + 4, c##r##1), vst1q_f32(o + 8, c##r##2);                                     \
    } else {                                                                                                           \
      vst1q_f32(o, vaddq_f32(vld1q_f32(o), c##r##0)), vst1q_f32(o + 4, vaddq_f32(vld1q_f32(o + 4), c##r##1));          \
      vst1q_f32(o + 8, vaddq_f32(vld1q_f32(o + 8), c##r##2));                                                          \
    }                                                                                                                  \
  }
  OUT(0) OUT(1) OUT(2) OUT(3) OUT(4) OUT(5) OUT(6) OUT(7)
#undef OUT
}

static __attribute__((noinline)) void micro_full(int64_t kc, const float *pa, const float *pb, float *out, int64_t ldo,
                                                 int first, const float *pfa) {
  micro(kc, pa, pb, out, ldo, first, pfa);
}

// micro_edge is micro for a tile cut by the edges (mr rows, nr columns) or
// by the shifted diagonal (with lower ≥ 0, only the pairs with j + c +
// lower ≥ i + r): the whole tile is computed into a buffer, in the same
// order, and the pairs wanted are stored or added from there.
static __attribute__((noinline)) void micro_edge(int64_t kc, const float *pa, const float *pb, float *out, int64_t ldo,
                                                 int first, const float *pfa, int64_t mr, int64_t nr, int64_t lower,
                                                 int64_t i, int64_t j) {
  float t[MR * NR];
  micro(kc, pa, pb, t, NR, 1, pfa);
  for (int64_t r = 0; r < mr; r++) {
    int64_t c0 = 0; // the first column wanted in row r
    if (lower >= 0 && i + r - j - lower > 0) c0 = i + r - j - lower;
    float *o = out + r * ldo;
    for (int64_t c = c0; c < nr; c++) o[c] = first ? t[r * NR + c] : o[c] + t[r * NR + c];
  }
}

int tl_gemm_tile(int64_t am, int64_t m, int64_t d, const float *ap, const float *b, int64_t ldb, const float *mu,
                 int64_t n, float *bp, float *out, int64_t ldo, int64_t lower) {
  if (lower >= 0 && m > n + lower) m = n + lower; // rows past it hold no pair
  if (m <= 0 || n <= 0) return 0;
  am = (am + MR - 1) / MR * MR;
  for (int64_t k0 = 0; k0 < d; k0 += KC) {
    const int64_t kc = d - k0 < KC ? d - k0 : KC;
    const int first = k0 == 0;
    for (int64_t j = 0; j < n; j += NR) pack_panel(b + j * ldb, ldb, mu, n - j, k0, kc, NR, bp + j * kc);
    for (int64_t i = 0; i < m; i += MR) { // a's panel stays in L1, b's in L2
      const float *pa = ap + k0 * am + i * kc;
      const int64_t mr = m - i < MR ? m - i : MR;
      // With lower set, the first panel of b that has a pair at or above
      // the diagonal: the one holding column i − lower.
      int64_t j = 0;
      if (lower >= 0 && i - lower > 0) j = (i - lower) / NR * NR;
      const float *pfa = i + MR < m ? pa + MR * kc : pa; // the next panel, fetched during the first tile
      for (; j < n; j += NR, pfa = pa) {
        const int64_t nr = n - j < NR ? n - j : NR;
        const int diag = lower >= 0 && j + lower < i + mr - 1;
        if (mr == MR && nr == NR && !diag)
          micro_full(kc, pa, bp + j * kc, out + i * ldo + j, ldo, first, pfa);
        else
          micro_edge(kc, pa, bp + j * kc, out + i * ldo + j, ldo, first, pfa, mr, nr, lower, i, j);
      }
    }
  }
  return 0;
}

int tl_gemm_mirror(int64_t m, int64_t n, const float *out, int64_t ldo, int64_t lower, float *t, int64_t ldt) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t j1 = n - j0 < 16 ? n : j0 + 16;
    for (int64_t i0 = 0; i0 < m && i0 < j1 - 1 + lower; i0 += 4) {
      for (int64_t j = j0; j < j1; j += 4) {
        // A whole 4×4 block strictly above the diagonal: transposed in
        // registers; any other, element by element.
        if (i0 + 4 <= m && j + 4 <= j1 && j + lower > i0 + 3) {
          float32x4_t r[4];
          for (int i = 0; i < 4; i++) r[i] = vld1q_f32(out + (i0 + i) * ldo + j);
          tr4(r);
          for (int c = 0; c < 4; c++) vst1q_f32(t + (j + c) * ldt + i0, r[c]);
          continue;
        }
        for (int64_t i = i0; i < i0 + 4 && i < m; i++)
          for (int64_t c = j; c < j + 4 && c < j1; c++)
            if (c + lower > i) t[c * ldt + i] = out[i * ldo + c];
      }
    }
  }
  return 0;
}

int tl_gemm_nt_f32_neon(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                        float *out, int64_t ldo, int64_t lower) {
  const int64_t am = (m + MR - 1) / MR * MR;
  // aligned_alloc wants a multiple of the alignment.
  float *ap = (float *)aligned_alloc(64, (sizeof(float) * am * d + 63) / 64 * 64);
  float *bp = (float *)aligned_alloc(64, (size_t)((NC + NR - 1) / NR * NR) * KC * sizeof(float));
  if (!ap || !bp) {
    free(ap);
    free(bp);
    return -1;
  }
  tl_gemm_pack_a(m, d, a, lda, NULL, 0, am / MR, ap);
  for (int64_t j = 0; j < n; j += NC)
    tl_gemm_tile(m, m, d, ap, b + j * ldb, ldb, NULL, n - j < NC ? n - j : NC, bp, out + j, ldo,
                 lower < 0 ? -1 : lower + j);
  free(ap);
  free(bp);
  return 0;
}

int tl_gemm_nt_f32_avx512(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float *out, int64_t ldo, int64_t lower) {
  return -1;
}

// tl_fma_loop: per round, 96 independent-in-fours FMLA on 24 registers
// (four passes over v0-v23): 96·4 lanes·2 = 768 flops, as on x86-64.
void tl_fma_loop(int64_t n) {
  if (n <= 0) return;
  __asm__ volatile("movi v30.4s, #0\n movi v31.4s, #0\n"
#define Z4(a, b, c, d) "movi v" #a ".4s, #0\n movi v" #b ".4s, #0\n movi v" #c ".4s, #0\n movi v" #d ".4s, #0\n"
                   Z4(0, 1, 2, 3) Z4(4, 5, 6, 7) Z4(8, 9, 10, 11) Z4(12, 13, 14, 15) Z4(16, 17, 18, 19) Z4(20, 21, 22, 23)
#undef Z4
                   "1:\n"
#define F4(a, b, c, d)                                                                                                 \
  "fmla v" #a ".4s, v30.4s, v31.4s\n fmla v" #b ".4s, v30.4s, v31.4s\n fmla v" #c ".4s, v30.4s, v31.4s\n fmla v" #d   \
  ".4s, v30.4s, v31.4s\n"
#define F24 F4(0, 1, 2, 3) F4(4, 5, 6, 7) F4(8, 9, 10, 11) F4(12, 13, 14, 15) F4(16, 17, 18, 19) F4(20, 21, 22, 23)
                   F24 F24 F24 F24
#undef F24
#undef F4
                   "subs %0, %0, #1\n"
                   "b.ne 1b\n"
                   : "+r"(n)
                   :
                   : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14",
                     "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v30", "v31", "cc");
}
#endif
