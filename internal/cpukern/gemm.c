// Dot products of every row of a with every row of b (out = a·bᵀ), float32,
// with AVX-512: a packed, cache-blocked matrix product in BLIS's design.
//
// The k axis goes in slices of KC. a's rows are packed once, slice by
// slice, in panels of MR rows (MR values of one k contiguous), and shared
// by every thread; a tile of at most NC rows of b packs its slice of b
// itself, k-major in panels of NR rows (NR values of one k contiguous: two
// vectors), into a buffer that stays in L2. The micro-kernel keeps an
// MR×NR tile of out in 28 of the 32 vector registers: per k it loads the
// two vectors of b and broadcasts the MR values of a into 28 fused
// multiply-adds, a's panel staying in L1 while b's panels stream from L2.
// Each pair's products are summed k by k within a slice, from zero, and
// the slice's sum added to out in slice order, so a value does not depend
// on where its pair sits in a tile, a block or the matrix: shards of a
// matrix agree bit for bit.
//
// arm64 has its own micro-kernel, in gemm_neon.c; elsewhere the entry
// points return -1 and the callers use the portable kernels of pairdist.c.
#include "gemm.h"
#include "isa.h"
#include <stdlib.h>
#include <string.h>

#define MR TL_GEMM_MR
#define NR TL_GEMM_NR
#define KC TL_GEMM_KC
#define NC TL_GEMM_NC

#if TL_X86

int tl_gemm_ok(void) {
  static int ok = -1; // asked once; threads asking at once get the same answer
  int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
  if (v < 0) {
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx512f") != 0;
    __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
  }
  return v;
}

#pragma GCC push_options
#pragma GCC target("avx512f")

// tr16 transposes the 16×16 block held in r (r[i] lane j becomes r[j]
// lane i).
static inline __attribute__((always_inline)) void tr16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4g+q], 128-bit lane L: column 4L+q of rows 4g…4g+3.
  for (int g = 0; g < 4; g++) {
    r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int q = 0; q < 4; q++) {
    t[q] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x88);
    t[q + 4] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xDD);
    t[q + 8] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x88);
    t[q + 12] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xDD);
  }
  for (int q = 0; q < 4; q++) {
    r[q] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0x88);
    r[q + 8] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0xDD);
    r[q + 4] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0x88);
    r[q + 12] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0xDD);
  }
}

static inline __mmask16 lanes(int64_t n) { return n >= 16 ? 0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

// load16 reads values [k, k+kn) (kn ≤ 16) of rows [0, rows) of x (stride
// ld) into r; rows past rows and lanes past kn are zero.
static inline __attribute__((always_inline)) void load16(const float *x, int64_t ld, int64_t rows, int64_t k,
                                                         int64_t kn, __m512 r[16]) {
  const __mmask16 m = lanes(kn);
  for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_maskz_loadu_ps(m, x + i * ld + k) : _mm512_setzero_ps();
}

// shift16 subtracts values [k, k+kn) of mu from rows [0, rows) of r (as
// load16 read them); rows past rows and lanes past kn stay zero.
static inline __attribute__((always_inline)) void shift16(const float *mu, int64_t rows, int64_t k, int64_t kn,
                                                          __m512 r[16]) {
  const __m512 s = _mm512_maskz_loadu_ps(lanes(kn), mu + k);
  for (int i = 0; i < 16; i++)
    if (i < rows) r[i] = _mm512_sub_ps(r[i], s);
}

int tl_gemm_pack_a(int64_t m, int64_t d, const float *a, int64_t lda, const float *mu, int64_t p0, int64_t p1,
                   float *ap) {
  if (!tl_gemm_ok()) return -1;
  const int64_t am = (m + MR - 1) / MR * MR;
  // The bits of every value times zero, or-ed: ±0 for finite values, a
  // NaN (exponent all ones) for NaN and ±Inf.
  __m512i seen = _mm512_setzero_si512();
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t k0 = 0; k0 < d; k0 += KC) {
    const int64_t kc = d - k0 < KC ? d - k0 : KC;
    for (int64_t p = p0; p < p1; p++) {
      const int64_t rows = m - p * MR < MR ? m - p * MR : MR;
      float *dst = ap + k0 * am + p * MR * kc;
      for (int64_t k = 0; k < kc; k += 16) {
        __m512 r[16];
        load16(a + p * MR * lda, lda, rows, k0 + k, kc - k, r);
        if (mu) shift16(mu, rows, k0 + k, kc - k, r);
        for (int i = 0; i < 16; i++) seen = _mm512_or_si512(seen, _mm512_castps_si512(_mm512_mul_ps(r[i], zero)));
        tr16(r);
        const int64_t kn = kc - k < 16 ? kc - k : 16;
        for (int t = 0; t < kn; t++) _mm512_mask_storeu_ps(dst + (k + t) * MR, (1u << MR) - 1, r[t]);
      }
    }
  }
  const __m512i exp = _mm512_set1_epi32(0x7f800000);
  return _mm512_cmpeq_epi32_mask(_mm512_and_si512(seen, exp), exp) != 0;
}

// pack_b packs values [k0, k0+kc) of rows [0, n) of b (n ≤ NC) into bp:
// panel p at bp + p*NR*kc holds bp[k*NR + c] = b[(p*NR + c)*ldb + k0 + k]
// (less mu[k0 + k] where mu is not NULL), rows past n zero.
static void pack_b(const float *b, int64_t ldb, const float *mu, int64_t n, int64_t k0, int64_t kc, float *bp) {
  for (int64_t j = 0; j < n; j += 16) {
    float *dst = bp + j / NR * NR * kc + j % NR;
    const int64_t ahead = n - j - 16 < 16 ? n - j - 16 : 16; // rows of the next group, fetched meanwhile
    for (int64_t k = 0; k < kc; k += 16) {
      for (int64_t i = 0; i < ahead; i++) _mm_prefetch((const char *)(b + (j + 16 + i) * ldb + k0 + k), _MM_HINT_T0);
      __m512 r[16];
      load16(b + j * ldb, ldb, n - j, k0 + k, kc - k, r);
      if (mu) shift16(mu, n - j, k0 + k, kc - k, r);
      tr16(r);
      const int64_t kn = kc - k < 16 ? kc - k : 16;
      for (int t = 0; t < kn; t++) _mm512_store_ps(dst + (k + t) * NR, r[t]);
    }
  }
  // The second half of a last panel with 16 rows or fewer.
  if (n % NR > 0 && n % NR <= 16) {
    float *dst = bp + n / NR * NR * kc + 16;
    for (int64_t k = 0; k < kc; k++) _mm512_store_ps(dst + k * NR, _mm512_setzero_ps());
  }
}

// micro computes the MR×NR tile of the packed panels pa and pb over kc and
// stores it to out (first) or adds it to out; with mk, only the lanes its
// masks name (mk[2r], mk[2r+1]: the two vectors of row r). With pfa, it
// fetches a's next panel (MR·kc values from pfa) into L2 on the way.
static inline __attribute__((always_inline)) void micro(int64_t kc, const float *restrict pa, const float *restrict pb,
                                                        float *out, int64_t ldo, int first, const __mmask16 *mk, const float *pfa) {
  __m512 c[MR][2];
#pragma GCC unroll 14
  for (int r = 0; r < MR; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
  if (!first) {
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++) {
      _mm_prefetch((const char *)(out + r * ldo), _MM_HINT_T0);
      _mm_prefetch((const char *)(out + r * ldo + 31), _MM_HINT_T0);
    }
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; k++) {
    const __m512 b0 = _mm512_load_ps(pb + k * NR), b1 = _mm512_load_ps(pb + k * NR + 16);
    if (pfa && k < kc * MR / 16) _mm_prefetch((const char *)(pfa + k * 16), _MM_HINT_T1);
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++) {
      const __m512 x = _mm512_set1_ps(pa[k * MR + r]);
      c[r][0] = _mm512_fmadd_ps(x, b0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(x, b1, c[r][1]);
    }
  }
#pragma GCC unroll 14
  for (int r = 0; r < MR; r++) {
    float *o = out + r * ldo;
    if (mk) {
      const __mmask16 m0 = mk[2 * r], m1 = mk[2 * r + 1];
      if (first) {
        _mm512_mask_storeu_ps(o, m0, c[r][0]);
        _mm512_mask_storeu_ps(o + 16, m1, c[r][1]);
      } else {
        _mm512_mask_storeu_ps(o, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, o), c[r][0]));
        _mm512_mask_storeu_ps(o + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, o + 16), c[r][1]));
      }
    } else if (first) {
      _mm512_storeu_ps(o, c[r][0]);
      _mm512_storeu_ps(o + 16, c[r][1]);
    } else {
      _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), c[r][0]));
      _mm512_storeu_ps(o + 16, _mm512_add_ps(_mm512_loadu_ps(o + 16), c[r][1]));
    }
  }
}

static __attribute__((noinline)) void micro_full(int64_t kc, const float *pa, const float *pb, float *out, int64_t ldo,
                                                 int first, const float *pfa) {
  micro(kc, pa, pb, out, ldo, first, NULL, pfa);
}

static __attribute__((noinline)) void micro_masked(int64_t kc, const float *pa, const float *pb, float *out,
                                                   int64_t ldo, int first, const __mmask16 *mk, const float *pfa) {
  micro(kc, pa, pb, out, ldo, first, mk, pfa);
}

int tl_gemm_tile(int64_t am, int64_t m, int64_t d, const float *ap, const float *b, int64_t ldb, const float *mu,
                 int64_t n, float *bp, float *out, int64_t ldo, int64_t lower) {
  if (!tl_gemm_ok()) return -1;
  if (lower >= 0 && m > n + lower) m = n + lower; // rows past it hold no pair
  if (m <= 0 || n <= 0) return 0;
  am = (am + MR - 1) / MR * MR;
  for (int64_t k0 = 0; k0 < d; k0 += KC) {
    const int64_t kc = d - k0 < KC ? d - k0 : KC;
    const int first = k0 == 0;
    pack_b(b, ldb, mu, n, k0, kc, bp);
    for (int64_t i = 0; i < m; i += MR) { // a's panel stays in L1, b's in L2
      const float *pa = ap + k0 * am + i * kc;
      const int64_t mr = m - i < MR ? m - i : MR;
      // With lower set, the first panel of b that has a pair at or above
      // the diagonal: the one holding column i − lower.
      int64_t j = 0;
      if (lower >= 0 && i - lower > 0) j = (i - lower) / NR * NR;
      const float *pfa = i + MR < m ? pa + MR * kc : NULL; // the next panel, fetched during the first tile
      for (; j < n; j += NR, pfa = NULL) {
        const int64_t nr = n - j < NR ? n - j : NR;
        const int diag = lower >= 0 && j + lower < i + mr - 1;
        if (mr == MR && nr == NR && !diag) {
          micro_full(kc, pa, bp + j * kc, out + i * ldo + j, ldo, first, pfa);
          continue;
        }
        __mmask16 mk[2 * MR];
        for (int64_t r = 0; r < MR; r++) {
          uint32_t m32 = r < mr ? (nr >= 32 ? 0xFFFFFFFFu : (1u << nr) - 1) : 0;
          if (diag) { // columns c with j + c + lower ≥ i + r
            const int64_t s = i + r - j - lower;
            m32 &= s <= 0 ? 0xFFFFFFFFu : s >= 32 ? 0 : ~((1u << s) - 1);
          }
          mk[2 * r] = (__mmask16)m32, mk[2 * r + 1] = (__mmask16)(m32 >> 16);
        }
        micro_masked(kc, pa, bp + j * kc, out + i * ldo + j, ldo, first, mk, pfa);
      }
    }
  }
  return 0;
}

int tl_gemm_mirror(int64_t m, int64_t n, const float *out, int64_t ldo, int64_t lower, float *t, int64_t ldt) {
  if (!tl_gemm_ok()) return -1;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 cols = lanes(n - j0);
    for (int64_t i0 = 0; i0 < m && i0 < j0 + 15 + lower; i0 += 16) {
      __m512 r[16];
      for (int64_t i = 0; i < 16; i++) { // only the pairs above the diagonal are read
        const int64_t s = i0 + i - j0 - lower + 1;
        const __mmask16 upper = s <= 0 ? 0xFFFF : s >= 16 ? 0 : (__mmask16)(0xFFFFu << s);
        r[i] = i0 + i < m ? _mm512_maskz_loadu_ps(cols & upper, out + (i0 + i) * ldo + j0) : _mm512_setzero_ps();
      }
      tr16(r);
      const int64_t jn = n - j0 < 16 ? n - j0 : 16;
      for (int64_t jj = 0; jj < jn; jj++) { // lanes i with i < m and i < j + lower
        const int64_t top = j0 + jj + lower < m ? j0 + jj + lower : m;
        _mm512_mask_storeu_ps(t + (j0 + jj) * ldt + i0, lanes(top - i0), r[jj]);
      }
    }
  }
  return 0;
}

int tl_gemm_nt_f32_avx512(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float *out, int64_t ldo, int64_t lower) {
  if (!tl_gemm_ok()) return -1;
  const int64_t am = (m + MR - 1) / MR * MR;
  // aligned_alloc wants a multiple of the alignment (NC·KC floats is one).
  float *ap = (float *)aligned_alloc(64, (sizeof(float) * am * d + 63) / 64 * 64);
  float *bp = (float *)aligned_alloc(64, sizeof(float) * NC * KC);
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

void tl_fma_loop(int64_t n) {
  if (n <= 0 || !tl_gemm_ok()) return;
  __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\n vpxord %%zmm31, %%zmm31, %%zmm31\n"
#define Z4(a, b, c, d) \
  "vmovaps %%zmm30, %%zmm" #a "\n vmovaps %%zmm30, %%zmm" #b "\n vmovaps %%zmm30, %%zmm" #c "\n vmovaps %%zmm30, %%zmm" #d "\n"
                   Z4(0, 1, 2, 3) Z4(4, 5, 6, 7) Z4(8, 9, 10, 11) Z4(12, 13, 14, 15) Z4(16, 17, 18, 19) Z4(20, 21, 22, 23)
#undef Z4
                   "1:\n"
#define FMA4(a, b, c, d)                                                                                          \
  "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #a "\n vfmadd231ps %%zmm30, %%zmm31, %%zmm" #b "\n vfmadd231ps %%zmm30, " \
  "%%zmm31, %%zmm" #c "\n vfmadd231ps %%zmm30, %%zmm31, %%zmm" #d "\n"
                   FMA4(0, 1, 2, 3) FMA4(4, 5, 6, 7) FMA4(8, 9, 10, 11) FMA4(12, 13, 14, 15) FMA4(16, 17, 18, 19)
                   FMA4(20, 21, 22, 23)
#undef FMA4
                   "dec %0\n"
                   "jnz 1b\n"
                   : "+r"(n)
                   :
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
                     "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
                     "xmm23", "xmm30", "xmm31", "cc");
}

#pragma GCC pop_options

#elif !defined(__aarch64__) // neither: the callers use pairdist.c's kernels

int tl_gemm_ok(void) { return 0; }

int tl_gemm_pack_a(int64_t m, int64_t d, const float *a, int64_t lda, const float *mu, int64_t p0, int64_t p1,
                   float *ap) {
  return -1;
}

int tl_gemm_tile(int64_t am, int64_t m, int64_t d, const float *ap, const float *b, int64_t ldb, const float *mu,
                 int64_t n, float *bp, float *out, int64_t ldo, int64_t lower) {
  return -1;
}

int tl_gemm_mirror(int64_t m, int64_t n, const float *out, int64_t ldo, int64_t lower, float *t, int64_t ldt) {
  return -1;
}

int tl_gemm_nt_f32_avx512(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float *out, int64_t ldo, int64_t lower) {
  return -1;
}

void tl_fma_loop(int64_t n) {}
#endif
