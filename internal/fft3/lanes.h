// Batched single-precision FFTs, sixteen lines at a time: see lanes.c.
#ifndef TAPELOOP_LANES_H
#define TAPELOOP_LANES_H
#include <stdint.h>

// A plan for lines of one length: complex transforms of n points, or, for
// real lines of even length n, complex transforms of n/2 points plus the
// twiddles that split them into the real transform.
typedef struct tl_fft1 tl_fft1;

tl_fft1 *tl_fft1_new(int n, int real);
void tl_fft1_free(tl_fft1 *f);

// Floats of scratch one call needs for lines of length up to n (aligned
// inside the calls; pass the same length to every call).
int64_t tl_lanes_scratch(int n);

// The widest instruction set this CPU runs: 2 avx512f, 1 avx2+fma, 0 the
// baseline (sse2 on x86-64, the only level elsewhere).
int tl_lanes_isa(void);
// The name of level isa: "avx512f", "avx2", "sse2"; "neon" on arm64,
// "generic" elsewhere.
const char *tl_lanes_isa_name(int isa);

// Complex lines along a strided axis, transformed in place: line l
// (l < lanes) has its n elements at x[base + l + i*st], i < n, in
// interleaved complex64 units. inverse: the unnormalised inverse
// transform. scale multiplies the result.
void tl_lanes_strided(int isa, const tl_fft1 *f, float *x, int64_t base, int64_t lanes, int64_t st, int inverse,
                      float scale, float *scratch);

// Contiguous complex lines, in place: line l (l < lines) has its n
// elements at x[base + l*ld + i], i < n, in complex64 units.
void tl_lanes_rows(int isa, const tl_fft1 *f, float *x, int64_t base, int64_t lines, int64_t ld, int inverse,
                   float scale, float *scratch);

// Real lines to half spectra: line l of n real values at in[l*ldi ...]
// becomes n/2 + 1 complex64 coefficients at out[l*ldo ...] (ldo in
// complex units). f is the plan made with (n, 1). Lines that are all zero
// in a group of sixteen are not transformed. Returns the number of lines
// that were not all zero.
int64_t tl_lanes_r2c(int isa, const tl_fft1 *f, const float *in, int64_t ldi, float *out, int64_t ldo,
                     int64_t lines, float *scratch);

// Half spectra back to real lines (unnormalised, times scale): the inverse
// of tl_lanes_r2c. The input is left as it was.
void tl_lanes_c2r(int isa, const tl_fft1 *f, const float *in, int64_t ldi, float *out, int64_t ldo, int64_t lines,
                  float scale, float *scratch);
#endif
