// The packed matrix product of gemm.c.
#ifndef TAPELOOP_GEMM_H
#define TAPELOOP_GEMM_H
#include <stdint.h>

// out[i*ldo + j] = sum_k a[i*lda + k] * b[j*ldb + k] for i < m, j < n,
// k < d (d ≥ 1), float32, with AVX-512 (the caller checks the CPU has it).
// With lower ≥ 0 only the pairs with j + lower ≥ i are wanted (the upper
// triangle of a symmetric product whose columns start lower rows after its
// rows): tiles of out holding none of them are skipped and keep what they
// held; the others are written whole. With lower < 0 every pair is.
// Returns 0, or -1 when its packing buffers cannot be allocated (out is
// then untouched).
int tl_gemm_nt_f32_avx512(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float *out, int64_t ldo, int64_t lower);
#endif
