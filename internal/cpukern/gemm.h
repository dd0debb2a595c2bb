// The packed matrix product of gemm.c (x86-64, AVX-512) and gemm_neon.c
// (arm64, NEON): float32 dot products of rows, out = a·bᵀ.
#ifndef TAPELOOP_GEMM_H
#define TAPELOOP_GEMM_H
#include <stdint.h>

// The blocking: a's rows go in panels of TL_GEMM_MR rows, b's in panels of
// TL_GEMM_NR rows, and the k axis in slices of TL_GEMM_KC; a pair's value
// is the sum over the slices, in order, of each slice's products summed k
// by k from zero. TL_GEMM_NC is the widest tile (rows of b) that
// tl_gemm_tile takes: the b slice it packs stays in L2. The panels follow
// each machine's register tile; KC is the same on every machine, so a
// pair's value is too.
#if defined(__aarch64__)
enum { TL_GEMM_MR = 8, TL_GEMM_NR = 12, TL_GEMM_KC = 384, TL_GEMM_NC = 264 };
#else
enum { TL_GEMM_MR = 14, TL_GEMM_NR = 32, TL_GEMM_KC = 384, TL_GEMM_NC = 256 };
#endif

// tl_gemm_ok reports whether the functions below run here (x86-64 with
// AVX-512, or arm64); elsewhere they return -1 and do nothing.
int tl_gemm_ok(void);

// tl_gemm_pack_a packs panels [p0, p1) of the m rows of a (d values each,
// row stride lda) into ap, laid out for tl_gemm_tile: slice by slice of
// k, in each the panels one after the other, a panel holding MR values per
// k (rows past m zero). ap holds ceil(m/MR)·MR·d floats, 64-byte aligned.
// Where mu is not NULL (d values) each row is packed less mu, a_ik − mu_k
// rounded to float32 once, as it is read: the dot products of the rows
// shifted by mu, with no pass of their own. Returns 0, or 1 when a value
// packed is NaN or ±Inf (all are packed).
int tl_gemm_pack_a(int64_t m, int64_t d, const float *a, int64_t lda, const float *mu, int64_t p0, int64_t p1,
                   float *ap);

// tl_gemm_tile computes out[i*ldo + j] = a_i · b_j for i < m, j < n ≤
// TL_GEMM_NC over d values, from a packed by tl_gemm_pack_a (am rows: its
// panel stride; m ≤ am) and b's rows (stride ldb), which it packs itself
// into bp (TL_GEMM_NC·TL_GEMM_KC floats, 64-byte aligned), less mu where
// mu is not NULL, as tl_gemm_pack_a does (a packed with the same mu gives
// the dot products of the shifted rows). With lower ≥ 0 only the pairs
// with j + lower ≥ i are computed and written, the rest of out is left as
// it was; with lower < 0 every pair is. Returns 0, or -1 where it does not
// run.
int tl_gemm_tile(int64_t am, int64_t m, int64_t d, const float *ap, const float *b, int64_t ldb, const float *mu,
                 int64_t n, float *bp, float *out, int64_t ldo, int64_t lower);

// tl_gemm_mirror copies the pairs of tl_gemm_tile's output strictly above
// its shifted diagonal (j + lower > i, lower ≥ 0) to their mirror images:
// t[j*ldt + i] = out[i*ldo + j] for i < m, j < n; t's other elements are
// left as they were.
int tl_gemm_mirror(int64_t m, int64_t n, const float *out, int64_t ldo, int64_t lower, float *t, int64_t ldt);

// tl_gemm_nt_f32_avx512 is out = a·bᵀ as tl_gemm_tile computes it (the
// same value for every pair, bit for bit), for any m and n, on one
// thread, with its own packing buffers. Returns 0, or -1 when they cannot
// be allocated or where it does not run (out is then untouched).
int tl_gemm_nt_f32_avx512(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float *out, int64_t ldo, int64_t lower);

// tl_gemm_nt_f32_neon is tl_gemm_nt_f32_avx512 on arm64 (NEON): the same
// values, bit for bit. Elsewhere it is not defined.
int tl_gemm_nt_f32_neon(int64_t m, int64_t n, int64_t d, const float *a, int64_t lda, const float *b, int64_t ldb,
                        float *out, int64_t ldo, int64_t lower);

// tl_fma_loop runs n rounds of 768 flops of independent fused
// multiply-adds (x86-64 with AVX-512: 24 of 16 lanes; arm64: 96 of 4
// lanes; elsewhere it returns at once): the core's peak rate, for
// benchmarks.
void tl_fma_loop(int64_t n);
#endif
