// The wavelet kernels of wavelet.c.
#ifndef TAPELOOP_WAVELET_H
#define TAPELOOP_WAVELET_H
#include <stdint.h>

// tl_hat_mul multiplies the rows (i, j), i0 ≤ i < i1, j0 ≤ j < j1, of
// spec, the half spectrum of a real array of p0·p1·p2 values (p0·p1·(p2/2+1)
// complex floats, interleaved), by the discrete transform of the Mexican
// hat ψ(u) = (3 − uᵀMu)·exp(−uᵀMu/2) sampled on the whole integer grid, and
// writes the products to dst (same layout). b00 … b22 are B = M⁻¹ and
// c = (2π)^{3/2}·√det B. The transform is the sum over the aliases m ∈ ℤ³
// of c·s·exp(−s/2), s = (ω+2πm)ᵀB(ω+2πm), with the terms whose s ≥ thr
// left out. scratch holds at least p2/2 + 16 doubles. It sets energy[j − j0]
// to the rows' part of the sum of the squared transform over the whole
// spectrum, counting the coefficients the half spectrum leaves out
// (Parseval), added over i in order. dst may be NULL: no product is
// written. When genergy is not NULL it sets genergy[j − j0] the same way
// to the rows' part of Σ |spec·ψ̂|² (in double, from spec and ψ̂ in
// double, whether or not dst is written), and when dc is not NULL and row
// (0, 0) is among the rows, *dc to spec(0)·ψ̂(0) (the real parts).
void tl_hat_mul(const float *spec, float *dst, int64_t p0, int64_t p1, int64_t p2, int64_t i0, int64_t i1, int64_t j0,
                int64_t j1, double b00, double b01, double b02, double b11, double b12, double b22, double c,
                double thr, double *scratch, double *energy, double *genergy, double *dc);

// tl_block_sums sets out to Σ g, Σ g² and max g over the n1 rows of n2
// floats at x + j·ld, j < n1, in double (max is NaN where a value is):
// with what 1 only out[0] and out[1] (the sums), with 2 only out[2] (the
// maximum), with 3 all three.
void tl_block_sums(const float *x, int64_t ld, int64_t n1, int64_t n2, double *out, int what);

// tl_half_energy sets out[j − j0], j0 ≤ j < j1, to the part of rows
// (i, j), i < p0, of Σ |c|² over the whole spectrum of a real array of
// p0·p1·p2 values, whose half c holds p0·p1·(p2/2+1) complex floats
// (interleaved): each coefficient counted twice but the first of a row
// and, p2 even, the last, which stand for themselves only; added over i in
// order, so a row's part does not depend on how the rows are split.
void tl_half_energy(const float *c, int64_t p0, int64_t p1, int64_t p2, int64_t j0, int64_t j1, double *out);
#endif
