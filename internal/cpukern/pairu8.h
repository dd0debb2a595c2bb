// Exact pairwise affinities of 8-bit images, see pairu8.c.
#ifndef TAPELOOP_PAIRU8_H
#define TAPELOOP_PAIRU8_H
#include <stdint.h>

enum { TL_U8_L1 = 0, TL_U8_L2 = 1, TL_U8_DOT = 2, TL_U8_COSINE = 3 };

// For i < m, j < n: the metric of rows a[i*lda …] and b[j*ldb …] (d bytes
// each) into out32 or out64 (whichever is not NULL) at [i*ldo + j]: −Σ|a−b|,
// −Σ(a−b)², Σa·b, or Σa·b/(‖a‖‖b‖). suma[i] = Σ_k a[i, k]; sqa[i], sqb[j]
// the rows' Σ x² (for l2 and cosine).
void tl_pair_u8(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, float *out32, double *out64,
                int64_t ldo);

// tl_pair_u8_limit: with vnni 0, tl_pair_u8 uses its portable loops (for
// tests); with 1, what the CPU has. Returns whether VNNI was in use.
int tl_pair_u8_limit(int vnni);
#endif
