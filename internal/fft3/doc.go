// Package fft3 computes 3-D discrete Fourier transforms of float32 arrays
// in C order: complex-to-complex, and real-to-complex with the last axis
// halved.
//
// The transforms are tapeloop's own (lanes.c): mixed-radix Stockham FFTs
// in single precision, vectorised across lines rather than within one, so
// that a 3-D transform's thousands of same-length lines fill the vector
// lanes (16 with AVX-512, 8 with AVX2, 4 with SSE2) with no shuffles inside
// the butterflies. Any length works; lengths whose prime factors are 2, 3
// and 5 are fastest (other primes cost O(p) per element). Measured on the
// 2-core AVX-512 machine tapeloop is developed on, a 200³ real forward plus
// inverse transform takes ~36 ms, against ~87 ms for FFTW 3.3.10 in single
// precision with FFTW_ESTIMATE plans and gonum's float64 FFTPACK port
// several times slower again. Errors stay at float32 rounding (norm-wise
// ~1e-7 relative, checked against a float64 DFT in the tests).
package fft3
