// Blocked pairwise L1 and squared-L2 distances, see pairdist.c.
#ifndef TAPELOOP_PAIRDIST_H
#define TAPELOOP_PAIRDIST_H
#include <stdint.h>

// The metrics of tl_pairdist_f32 and tl_pairdist_f64:
// TL_PAIR_L1:  out[i*ldo + j] = -sum_k |a[i*lda + k] - b[j*ldb + k]|
// TL_PAIR_L2:  out[i*ldo + j] = -sum_k (a[i*lda + k] - b[j*ldb + k])^2
// TL_PAIR_DOT: out[i*ldo + j] =  sum_k  a[i*lda + k] * b[j*ldb + k]
// for 0 <= i < m, 0 <= j < n, 0 <= k < d; each pair summed in the same
// order wherever it sits, so results do not depend on the blocking.
enum { TL_PAIR_L1 = 0, TL_PAIR_L2 = 1, TL_PAIR_DOT = 2 };
void tl_pairdist_f32(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *out, int64_t ldo, int metric);
// tl_dot_upper_f32 is tl_pairdist_f32's TL_PAIR_DOT for the pairs with
// j + lower ≥ i (lower ≥ 0): others may be left as they were, or written.
void tl_dot_upper_f32(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                      float *out, int64_t ldo, int64_t lower);
void tl_pairdist_f64(int64_t m, int64_t n, int64_t d, const double *a, int64_t lda,
                     const double *b, int64_t ldb, double *out, int64_t ldo, int metric);
// On arm64 (pairdist_neon.c): tl_pairdist_f32 for L1 and L2, and
// tl_pairdist_f64 for every metric, with NEON; they return 0, or -1
// having done nothing for a metric they do not compute.
int tl_pairdist_f32_neon(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float *out, int64_t ldo, int metric);
int tl_pairdist_f64_neon(int64_t m, int64_t n, int64_t d, const double *a, int64_t lda, const double *b, int64_t ldb,
                         double *out, int64_t ldo, int metric);
// The instruction set levels the kernels dispatch to, in increasing order.
// TL_ISA_BASE is the architecture's baseline, compiled without target
// attributes: SSE2 on x86-64, NEON on arm64, plain C elsewhere (isa.h);
// TL_ISA_AVX2 and TL_ISA_AVX512 exist on x86-64 only.
enum { TL_ISA_BASE = 0, TL_ISA_AVX2 = 1, TL_ISA_AVX512 = 2 };
// Which instruction set the kernels dispatch to: "avx512f", "avx2" or
// "sse2" on x86-64, "neon" on arm64, "generic" elsewhere.
const char *tl_pairdist_isa(void);
// The highest level this build has kernels for: TL_ISA_AVX512 on x86-64,
// TL_ISA_BASE elsewhere.
int tl_isa_top(void);
// The instruction set the kernels use: a TL_ISA_ level.
int tl_cpu_isa(void);
// tl_limit_isa makes the kernels use at most level isa (for tests of the other
// paths) and returns the one they used before; not safe to call while
// kernels run.
int tl_limit_isa(int isa);
#endif
