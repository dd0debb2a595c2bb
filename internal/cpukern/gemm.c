// Dot products of every row of a with every row of b (out = a·bᵀ), float32,
// with AVX-512: a packed, cache-blocked matrix product in BLIS's design.
//
// The k axis goes in blocks of KC; for each, a block of NC rows of b is
// packed k-major in panels of NR rows (NR values of one k contiguous: two
// vectors), and the rows of a in panels of MR (MR values of one k
// contiguous). The micro-kernel keeps an MR×NR tile of out in 16 vector
// registers: per k it loads the two vectors of b and broadcasts the MR
// values of a into 16 fused multiply-adds. Each pair's products are summed
// k by k within a block, from zero, and the block's sum added to out in
// block order, so a value does not depend on where its pair sits in a
// tile, a block or the matrix: shards of a matrix agree bit for bit.
#include "gemm.h"
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define MR 8
#define NR 32
#define KC 384
#define NC 512

#pragma GCC push_options
#pragma GCC target("avx512f")

// pack_a packs rows [0, mr) of a (mr ≤ MR), k in [k0, k0+kc), into ap:
// ap[k*MR + r]; rows past mr are zero.
static void pack_a(const float *a, int64_t lda, int64_t mr, int64_t k0, int64_t kc, float *ap) {
  for (int64_t k = 0; k < kc; k++) {
    int64_t r = 0;
    for (; r < mr; r++) ap[k * MR + r] = a[r * lda + k0 + k];
    for (; r < MR; r++) ap[k * MR + r] = 0;
  }
}

// pack_b packs rows [0, nr) of b (nr ≤ NR) the same way: bp[k*NR + c]. A
// full panel gathers the NR values of each k (16 rows per gather), so
// that the stores are whole vectors.
static void pack_b(const float *b, int64_t ldb, int64_t nr, int64_t k0, int64_t kc, float *bp) {
  if (nr == NR && 16 * ldb < (1 << 29)) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32((int)ldb));
    const float *b0 = b + k0, *b1 = b + 16 * ldb + k0;
    for (int64_t k = 0; k < kc; k++) {
      _mm512_store_ps(bp + k * NR, _mm512_i32gather_ps(idx, b0 + k, 4));
      _mm512_store_ps(bp + k * NR + 16, _mm512_i32gather_ps(idx, b1 + k, 4));
    }
    return;
  }
  for (int64_t k = 0; k < kc; k++) {
    int64_t c = 0;
    for (; c < nr; c++) bp[k * NR + c] = b[c * ldb + k0 + k];
    for (; c < NR; c++) bp[k * NR + c] = 0;
  }
}

// micro computes the MR×NR tile of packed panels ap and bp over kc and adds
// it to out (rows mr ≤ MR, columns nr ≤ NR valid), or stores it when first.
static void micro(int64_t kc, const float *ap, const float *bp, float *out, int64_t ldo, int64_t mr, int64_t nr,
                  int first) {
  __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps(),
         c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(), c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(),
         c40 = _mm512_setzero_ps(), c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps(),
         c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps(), c71 = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k++) {
    const __m512 b0 = _mm512_load_ps(bp + k * NR), b1 = _mm512_load_ps(bp + k * NR + 16);
    const float *av = ap + k * MR;
    __m512 x;
    x = _mm512_set1_ps(av[0]), c00 = _mm512_fmadd_ps(x, b0, c00), c01 = _mm512_fmadd_ps(x, b1, c01);
    x = _mm512_set1_ps(av[1]), c10 = _mm512_fmadd_ps(x, b0, c10), c11 = _mm512_fmadd_ps(x, b1, c11);
    x = _mm512_set1_ps(av[2]), c20 = _mm512_fmadd_ps(x, b0, c20), c21 = _mm512_fmadd_ps(x, b1, c21);
    x = _mm512_set1_ps(av[3]), c30 = _mm512_fmadd_ps(x, b0, c30), c31 = _mm512_fmadd_ps(x, b1, c31);
    x = _mm512_set1_ps(av[4]), c40 = _mm512_fmadd_ps(x, b0, c40), c41 = _mm512_fmadd_ps(x, b1, c41);
    x = _mm512_set1_ps(av[5]), c50 = _mm512_fmadd_ps(x, b0, c50), c51 = _mm512_fmadd_ps(x, b1, c51);
    x = _mm512_set1_ps(av[6]), c60 = _mm512_fmadd_ps(x, b0, c60), c61 = _mm512_fmadd_ps(x, b1, c61);
    x = _mm512_set1_ps(av[7]), c70 = _mm512_fmadd_ps(x, b0, c70), c71 = _mm512_fmadd_ps(x, b1, c71);
  }
  const __m512 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                             {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
  const __mmask16 m1 = nr >= NR ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
  for (int64_t r = 0; r < mr; r++) {
    float *o = out + r * ldo;
    if (first) {
      _mm512_mask_storeu_ps(o, m0, acc[r][0]);
      _mm512_mask_storeu_ps(o + 16, m1, acc[r][1]);
    } else {
      _mm512_mask_storeu_ps(o, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, o), acc[r][0]));
      _mm512_mask_storeu_ps(o + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, o + 16), acc[r][1]));
    }
  }
}

int tl_gemm_nt_f32_avx512(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float *out, int64_t ldo, int64_t lower) {
  const int64_t mp = (m + MR - 1) / MR;
  float *ap = (float *)aligned_alloc(64, sizeof(float) * MR * KC * mp);
  float *bp = (float *)aligned_alloc(64, sizeof(float) * NR * KC * (NC / NR));
  if (!ap || !bp) {
    free(ap);
    free(bp);
    return -1;
  }
  for (int64_t k0 = 0; k0 < d; k0 += KC) {
    const int64_t kc = d - k0 < KC ? d - k0 : KC;
    const int first = k0 == 0;
    for (int64_t i = 0; i < m; i += MR) pack_a(a + i * lda, lda, m - i < MR ? m - i : MR, k0, kc, ap + (i / MR) * MR * KC);
    for (int64_t jc = 0; jc < n; jc += NC) {
      const int64_t nc = n - jc < NC ? n - jc : NC;
      for (int64_t j = 0; j < nc; j += NR)
        pack_b(b + (jc + j) * ldb, ldb, nc - j < NR ? nc - j : NR, k0, kc, bp + (j / NR) * NR * KC);
      for (int64_t i = 0; i < m; i += MR) { // a's panel stays in L1, b's block in L2
        // With lower set, the first tile that has a pair at or above the
        // diagonal: the tile holding column i − lower.
        int64_t j = 0;
        if (lower >= 0 && i - lower - jc > 0) j = (i - lower - jc) / NR * NR;
        for (; j < nc; j += NR)
          micro(kc, ap + (i / MR) * MR * KC, bp + (j / NR) * NR * KC, out + i * ldo + jc + j, ldo,
                m - i < MR ? m - i : MR, nc - j < NR ? nc - j : NR, first);
      }
    }
  }
  free(ap);
  free(bp);
  return 0;
}

#pragma GCC pop_options
