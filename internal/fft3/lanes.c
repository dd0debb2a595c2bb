// Batched single-precision FFTs vectorised across lines.
//
// A 3-D transform is three passes of 1-D transforms along the axes, and
// every pass has thousands of independent lines of the same length. Here
// the lanes of a vector hold as many lines (16 with AVX-512): each butterfly of a
// mixed-radix Stockham FFT (radices 4, 2, 3, 5 and, for other primes, the
// DFT sum) runs on whole vectors, exactly as the scalar algorithm would on
// one line, so there are no shuffles inside the transform. Lines along a
// strided axis are neighbours in memory and load as vectors directly (re
// and im split by one shuffle); lines along the contiguous axis are
// transposed in 16×16 blocks on the way in and out. Real lines of even
// length n go through an n/2-point complex transform and one split pass.
//
// Twiddles are computed in double and rounded once. The code is compiled
// with GCC vector extensions for AVX-512, AVX2+FMA and baseline SSE2 (16,
// 8 and 4 lanes) on x86-64, and the caller picks the set; elsewhere for
// the baseline alone, 4 lanes (NEON on arm64).
#include "lanes.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

// TL_X86: whether the AVX-512 and AVX2 copies are compiled (x86-64, unless
// TL_PORTABLE is defined to test the portable copy there).
#if defined(__x86_64__) && !defined(TL_PORTABLE)
#define TL_X86 1
#else
#define TL_X86 0
#endif

#define AI static inline __attribute__((always_inline))

// Vectors of 16, 8 and 4 floats (AVX-512, AVX2, SSE2 registers), their
// index twins, and sixteen, eight or four complex numbers split into real
// and imaginary parts.
typedef float vf16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));
typedef struct {
  vf16 re, im;
} cv16;
typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef struct {
  vf8 re, im;
} cv8;
typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef struct {
  vf4 re, im;
} cv4;

struct tl_fft1 {
  int n;    // complex transform length
  int real; // the real line length this plan serves (n or 2n), 0 if complex
  int nf;   // number of stages
  int fac[64];
  int64_t twoff[64], csoff[64];
  float *tw;   // per stage (L = p·m): e^(−2πi·j·t/L), j < m, 1 ≤ t < p
  float *cs;   // per stage: cos and sin of 2πk/p, k < p
  float *post; // real lines of even length: e^(−2πik/real), k ≤ n
};

// Shuffles of two w-lane vectors a, b (indices ≥ w pick from b): the
// even and odd elements (re and im of interleaved complex numbers), and
// their interleaving back.
#if TL_X86
static const vi16 EVEN16 = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
static const vi16 ODD16 = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
static const vi16 LO16 = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
static const vi16 HI16 = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
static const vi8 EVEN8 = {0, 2, 4, 6, 8, 10, 12, 14}, ODD8 = {1, 3, 5, 7, 9, 11, 13, 15};
static const vi8 LO8 = {0, 8, 1, 9, 2, 10, 3, 11}, HI8 = {4, 12, 5, 13, 6, 14, 7, 15};
#endif
static const vi4 EVEN4 = {0, 2, 4, 6}, ODD4 = {1, 3, 5, 7}, LO4 = {0, 4, 1, 5}, HI4 = {2, 6, 3, 7};

// Transpose rounds for w×w blocks: bit b of the row and column index
// exchanged between rows i (bit clear) and i|b.
#define T0(w, b, c) (((c) & (b)) ? (w) + ((c) ^ (b)) : (c))
#define T1(w, b, c) (((c) & (b)) ? (w) + (c) : ((c) ^ (b)))
#define ROW4(F, w, b, o) F(w, b, o + 0), F(w, b, o + 1), F(w, b, o + 2), F(w, b, o + 3)
#define ROW16(F, b) {ROW4(F, 16, b, 0), ROW4(F, 16, b, 4), ROW4(F, 16, b, 8), ROW4(F, 16, b, 12)}
#define ROW8(F, b) {ROW4(F, 8, b, 0), ROW4(F, 8, b, 4)}
#define ROW4_(F, b) {ROW4(F, 4, b, 0)}
#if TL_X86
static const vi16 TR0_16[4] = {ROW16(T0, 1), ROW16(T0, 2), ROW16(T0, 4), ROW16(T0, 8)};
static const vi16 TR1_16[4] = {ROW16(T1, 1), ROW16(T1, 2), ROW16(T1, 4), ROW16(T1, 8)};
static const vi8 TR0_8[3] = {ROW8(T0, 1), ROW8(T0, 2), ROW8(T0, 4)};
static const vi8 TR1_8[3] = {ROW8(T1, 1), ROW8(T1, 2), ROW8(T1, 4)};
#endif
static const vi4 TR0_4[2] = {ROW4_(T0, 1), ROW4_(T0, 2)};
static const vi4 TR1_4[2] = {ROW4_(T1, 1), ROW4_(T1, 2)};

tl_fft1 *tl_fft1_new(int n, int real) {
  tl_fft1 *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->real = real ? n : 0;
  f->n = real && n % 2 == 0 ? n / 2 : n;
  int r = f->n;
  while (r % 4 == 0) f->fac[f->nf++] = 4, r /= 4;
  while (r % 2 == 0) f->fac[f->nf++] = 2, r /= 2;
  for (int p = 3; r > 1; p += 2)
    while (r % p == 0) f->fac[f->nf++] = p, r /= p;
  int64_t ntw = 0, ncs = 0;
  for (int st = 0, L = f->n; st < f->nf; L /= f->fac[st], st++) {
    f->twoff[st] = ntw;
    f->csoff[st] = ncs;
    ntw += 2 * (int64_t)(L / f->fac[st]) * (f->fac[st] - 1);
    ncs += 2 * (int64_t)f->fac[st];
  }
  f->tw = malloc(sizeof(float) * (ntw + 1));
  f->cs = malloc(sizeof(float) * (ncs + 1));
  if (real && n % 2 == 0) f->post = malloc(sizeof(float) * 2 * (f->n + 1));
  if (!f->tw || !f->cs || (real && n % 2 == 0 && !f->post)) {
    tl_fft1_free(f);
    return NULL;
  }
  for (int st = 0, L = f->n; st < f->nf; L /= f->fac[st], st++) {
    const int p = f->fac[st], m = L / p;
    float *tw = f->tw + f->twoff[st], *cs = f->cs + f->csoff[st];
    for (int j = 0; j < m; j++)
      for (int t = 1; t < p; t++) {
        const double a = -2 * M_PI * (double)((int64_t)j * t % L) / L;
        tw[2 * ((int64_t)j * (p - 1) + t - 1)] = (float)cos(a);
        tw[2 * ((int64_t)j * (p - 1) + t - 1) + 1] = (float)sin(a);
      }
    for (int k = 0; k < p; k++) {
      cs[2 * k] = (float)cos(2 * M_PI * k / p);
      cs[2 * k + 1] = (float)sin(2 * M_PI * k / p);
    }
  }
  if (f->post)
    for (int k = 0; k <= f->n; k++) {
      const double a = -2 * M_PI * k / n;
      f->post[2 * k] = (float)cos(a);
      f->post[2 * k + 1] = (float)sin(a);
    }
  return f;
}

void tl_fft1_free(tl_fft1 *f) {
  if (!f) return;
  free(f->tw);
  free(f->cs);
  free(f->post);
  free(f);
}

// Three work buffers of n + 2 elements of the widest cv, plus alignment.
int64_t tl_lanes_scratch(int n) { return 3 * (int64_t)(n + 2) * 2 * 16 + 16; }

#if TL_X86
#pragma GCC push_options
#pragma GCC target("avx512f")
#define SFX(x) x##_avx512
#define W 16
#define LOGW 4
#define VF vf16
#define CV cv16
#define EVEN EVEN16
#define ODD ODD16
#define LO LO16
#define HI HI16
#define TR0 TR0_16
#define TR1 TR1_16
#include "lanes_impl.h"
#include "lanes_undef.h"
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define SFX(x) x##_avx2
#define W 8
#define LOGW 3
#define VF vf8
#define CV cv8
#define EVEN EVEN8
#define ODD ODD8
#define LO LO8
#define HI HI8
#define TR0 TR0_8
#define TR1 TR1_8
#include "lanes_impl.h"
#include "lanes_undef.h"
#pragma GCC pop_options
#endif

#define SFX(x) x##_128
#define W 4
#define LOGW 2
#define VF vf4
#define CV cv4
#define EVEN EVEN4
#define ODD ODD4
#define LO LO4
#define HI HI4
#define TR0 TR0_4
#define TR1 TR1_4
#include "lanes_impl.h"
#include "lanes_undef.h"

int tl_lanes_isa(void) {
#if TL_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 2;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
  return 0;
}

const char *tl_lanes_isa_name(int isa) {
#if TL_X86
  static const char *names[] = {"sse2", "avx2", "avx512f"};
  return names[isa];
#elif defined(__aarch64__)
  return "neon";
#else
  return "generic";
#endif
}

// The selectors: each transform calls its copy for the instruction set.
void tl_lanes_strided(int isa, const tl_fft1 *f, float *x, int64_t base, int64_t lanes, int64_t st, int inverse,
                      float scale, float *scratch) {
  switch (isa) {
#if TL_X86
  case 2: strided_avx512(f, x, base, lanes, st, inverse, scale, scratch); break;
  case 1: strided_avx2(f, x, base, lanes, st, inverse, scale, scratch); break;
#endif
  default: strided_128(f, x, base, lanes, st, inverse, scale, scratch);
  }
}

void tl_lanes_rows(int isa, const tl_fft1 *f, float *x, int64_t base, int64_t lines, int64_t ld, int inverse,
                   float scale, float *scratch) {
  switch (isa) {
#if TL_X86
  case 2: rows_avx512(f, x, base, lines, ld, inverse, scale, scratch); break;
  case 1: rows_avx2(f, x, base, lines, ld, inverse, scale, scratch); break;
#endif
  default: rows_128(f, x, base, lines, ld, inverse, scale, scratch);
  }
}

int64_t tl_lanes_r2c(int isa, const tl_fft1 *f, const float *in, int64_t ldi, float *out, int64_t ldo, int64_t lines,
                     float *scratch) {
  switch (isa) {
#if TL_X86
  case 2: return r2c_avx512(f, in, ldi, out, ldo, lines, scratch);
  case 1: return r2c_avx2(f, in, ldi, out, ldo, lines, scratch);
#endif
  default: return r2c_128(f, in, ldi, out, ldo, lines, scratch);
  }
}

void tl_lanes_c2r(int isa, const tl_fft1 *f, const float *in, int64_t ldi, float *out, int64_t ldo, int64_t lines,
                  float scale, float *scratch) {
  switch (isa) {
#if TL_X86
  case 2: c2r_avx512(f, in, ldi, out, ldo, lines, scale, scratch); break;
  case 1: c2r_avx2(f, in, ldi, out, ldo, lines, scale, scratch); break;
#endif
  default: c2r_128(f, in, ldi, out, ldo, lines, scale, scratch);
  }
}
