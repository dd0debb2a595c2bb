// The wavelet kernels of wavelet.c.
#ifndef TAPELOOP_WAVELET_H
#define TAPELOOP_WAVELET_H
#include <stdint.h>

// tl_hat_mul multiplies planes [i0, i1) of spec, the half spectrum of a
// real array of p[0]·p[1]·p[2] values (p[0]·p[1]·(p[2]/2+1) complex floats,
// interleaved), by the discrete transform of the Mexican hat
// ψ(u) = (3 − uᵀMu)·exp(−uᵀMu/2) sampled on the whole integer grid, and
// writes the products to dst (same layout). b holds B = M⁻¹ as b00 b01
// b02 b11 b12 b22 and c = (2π)^{3/2}·√det B. The transform is the sum over
// the aliases m ∈ ℤ³ of c·s·exp(−s/2), s = (ω+2πm)ᵀB(ω+2πm), with the
// terms whose s ≥ thr left out. scratch holds at least p[2]/2 + 16
// doubles. It sets energy[i − i0] to plane i's part of the sum of the
// squared transform over the whole spectrum, counting the coefficients the
// half spectrum leaves out (Parseval).
void tl_hat_mul(const float *spec, float *dst, int64_t p0, int64_t p1, int64_t p2, int64_t i0, int64_t i1,
                double b00, double b01, double b02, double b11, double b12, double b22, double c, double thr,
                double *scratch, double *energy);

// tl_block_sums sets out to Σ g, Σ g² and max g over the n1 rows of n2
// floats at x + j·ld, j < n1, in double (max is NaN where a value is).
void tl_block_sums(const float *x, int64_t ld, int64_t n1, int64_t n2, double *out);
#endif
