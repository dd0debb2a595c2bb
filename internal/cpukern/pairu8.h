// Exact pairwise affinities of 8-bit images, see pairu8.c.
#ifndef TAPELOOP_PAIRU8_H
#define TAPELOOP_PAIRU8_H
#include <stdint.h>

enum { TL_U8_L1 = 0, TL_U8_L2 = 1, TL_U8_DOT = 2, TL_U8_COSINE = 3 };

// The output types of tl_pair_u8.
enum { TL_OUT_F32 = 0, TL_OUT_F64 = 1, TL_OUT_I32 = 2, TL_OUT_I64 = 3 };

// For i < m, j < n: the metric of rows a[i*lda …] and b[j*ldb …] (d bytes
// each), −Σ|a−b|, −Σ(a−b)², Σa·b, or Σa·b/(‖a‖‖b‖), stored in the output
// type (TL_OUT_…) at out[i*ldo + j], and for the columns j ≥ tj also at
// tout[j*ldo + i] when tout is not NULL (the transposed block of a
// symmetric matrix). An integer output must hold every value (the caller
// checks the bound); cosine is for the float types only. suma[i] = Σ_k
// a[i, k]; sqa[i], sqb[j] the rows' Σ x² (for l2 and cosine). sum, when not
// NULL, receives the sum of every integer value stored (those stored twice
// counted twice; 0 for cosine) as a 128-bit two's-complement integer, low
// word first. scratch, when not NULL, is 64-byte aligned memory of
// tl_pair_u8_scratch(m, d, metric) bytes for the kernels' packed copies of
// the rows (else they allocate their own on each call).
void tl_pair_u8(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, void *out, void *tout, int type,
                int64_t ldo, int64_t tj, int64_t sum[2], void *scratch);

// tl_pair_u8_scratch is the size of tl_pair_u8's scratch for m rows of d
// bytes, 0 when it needs none.
int64_t tl_pair_u8_scratch(int64_t m, int64_t d, int metric);

// tl_u8_sums sets sum[i] = Σ_k x[i*d + k] and sq[i] = Σ_k x[i*d + k]² for
// i < n.
void tl_u8_sums(const uint8_t *x, int64_t n, int64_t d, int64_t *sum, int64_t *sq);

// tl_pair_u8_vnni reports whether tl_pair_u8 runs on AVX-512 VNNI (else
// its portable loops).
int tl_pair_u8_vnni(void);

// tl_pair_u8_limit: with vnni 0, tl_pair_u8 uses its portable loops (for
// tests); with 1, what the CPU has. Returns whether VNNI was in use.
int tl_pair_u8_limit(int vnni);
// On arm64 (pairu8_neon.c): tl_pair_u8_neon and tl_u8_sums_neon are
// tl_pair_u8 and tl_u8_sums with NEON (UDOT where the CPU has it), the
// same results bit for bit; they return 0, or -1 having done nothing at
// level 0. tl_pair_u8_neon_limit sets the level, 2 UDOT (where the CPU
// has it), 1 plain NEON, 0 none, and returns the level before;
// tl_pair_u8_neon_level returns the level in use.
int tl_pair_u8_neon(int64_t m, int64_t n, int64_t d, const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb,
                    int metric, const int64_t *suma, const int64_t *sqa, const int64_t *sqb, void *out, void *tout,
                    int type, int64_t ldo, int64_t tj, int64_t sum[2]);
int tl_u8_sums_neon(const uint8_t *x, int64_t n, int64_t d, int64_t *sum, int64_t *sq);
int tl_pair_u8_neon_limit(int level);
int tl_pair_u8_neon_level(void);
#endif
