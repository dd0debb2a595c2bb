// The wavelet sweep's kernels.
//
// tl_hat_mul multiplies the volume's spectrum by the Mexican hat's
// spectrum, computed in closed form rather than by transforming the
// sampled kernel: by Poisson's summation formula, the discrete transform
// of the hat sampled on the whole grid is the sum, over the aliases
// ω + 2πm, of its continuous transform, c·s·exp(−s/2) with s = ωᵀBω. The
// aliases that matter are found per row (a line along the last axis): the
// least s over the row, the Schur complement of b22, rules out a whole
// (m0, m1), and the interval of z where s < thr bounds the rest, so a
// coefficient costs about one exp per alias near it (one, away from the
// edges of a wide kernel's spectrum). tl_block_sums reduces the response,
// tl_half_energy a spectrum (Parseval).
//
// Both are written once, in wavelet_impl.h, with GCC vector extensions, and
// compiled for AVX-512, AVX2 and SSE2 on x86-64, where tl_cpu_isa()
// picks, and for the baseline alone elsewhere.
#include "wavelet.h"
#include "isa.h"
#include "pairdist.h"
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#if TL_X86
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#define W 8
#define SFX(x) x##_512
#define DUPLO ((SFX(vl)){0, 0, 1, 1, 2, 2, 3, 3})
#define DUPHI ((SFX(vl)){4, 4, 5, 5, 6, 6, 7, 7})
#include "wavelet_impl.h"
#undef W
#undef SFX
#undef DUPLO
#undef DUPHI
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define W 4
#define SFX(x) x##_256
#define DUPLO ((SFX(vl)){0, 0, 1, 1})
#define DUPHI ((SFX(vl)){2, 2, 3, 3})
#include "wavelet_impl.h"
#undef W
#undef SFX
#undef DUPLO
#undef DUPHI
#pragma GCC pop_options
#endif

#define W 2
#define SFX(x) x##_128
#define DUPLO ((SFX(vl)){0, 0})
#define DUPHI ((SFX(vl)){1, 1})
#include "wavelet_impl.h"
#undef W
#undef SFX
#undef DUPLO
#undef DUPHI

// The selectors of the three kernels.
void tl_hat_mul(const float *spec, float *dst, int64_t p0, int64_t p1, int64_t p2, int64_t i0, int64_t i1, int64_t j0,
                int64_t j1, double b00, double b01, double b02, double b11, double b12, double b22, double c,
                double thr, double *scratch, double *energy, double *genergy, double *dc) {
  const int64_t p[3] = {p0, p1, p2};
  const double b[6] = {b00, b01, b02, b11, b12, b22};
  switch (tl_cpu_isa()) {
#if TL_X86
  case TL_ISA_AVX512: hat_mul_512(spec, dst, p, i0, i1, j0, j1, b, c, thr, scratch, energy, genergy, dc); break;
  case TL_ISA_AVX2: hat_mul_256(spec, dst, p, i0, i1, j0, j1, b, c, thr, scratch, energy, genergy, dc); break;
#endif
  default: hat_mul_128(spec, dst, p, i0, i1, j0, j1, b, c, thr, scratch, energy, genergy, dc);
  }
}

void tl_block_sums(const float *x, int64_t ld, int64_t n1, int64_t n2, double *out, int what) {
  switch (tl_cpu_isa()) {
#if TL_X86
  case TL_ISA_AVX512: block_sums_512(x, ld, n1, n2, out, what); break;
  case TL_ISA_AVX2: block_sums_256(x, ld, n1, n2, out, what); break;
#endif
  default: block_sums_128(x, ld, n1, n2, out, what);
  }
}

void tl_half_energy(const float *c, int64_t p0, int64_t p1, int64_t p2, int64_t j0, int64_t j1, double *out) {
  switch (tl_cpu_isa()) {
#if TL_X86
  case TL_ISA_AVX512: half_energy_512(c, p0, p1, p2, j0, j1, out); break;
  case TL_ISA_AVX2: half_energy_256(c, p0, p1, p2, j0, j1, out); break;
#endif
  default: half_energy_128(c, p0, p1, p2, j0, j1, out);
  }
}
