// Package fft3 computes 3-D discrete Fourier transforms of float32 arrays
// in C order: complex-to-complex, and real-to-complex with the last axis
// halved.
//
// The transforms are tapeloop's own (lanes.c): mixed-radix Stockham FFTs
// in single precision, vectorised across lines rather than within one, so
// that a 3-D transform's thousands of same-length lines fill the vector
// lanes (16 with AVX-512, 8 with AVX2, 4 with SSE2) with no shuffles inside
// the butterflies. Any length works; lengths whose prime factors are 2, 3
// and 5 are fastest (other primes cost O(p) per element); BENCHMARKS.md
// compares them with FFTW. Errors stay at float32 rounding (norm-wise
// ~1e-7 relative, checked against a float64 DFT in the tests).
package fft3
