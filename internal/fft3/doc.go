// Package fft3 computes 3-D discrete Fourier transforms of arrays in C
// order: complex-to-complex, and real-to-complex with the last axis halved.
//
// The default build uses gonum's FFTPACK port, float64, any sizes; lines
// along the strided axes are moved in blocks of neighbouring lines into
// contiguous scratch, and the work is spread over GOMAXPROCS goroutines.
// Built with -tags fftw it uses FFTW 3 (libfftw3-dev; double precision,
// its own threads), several times faster. FFTW is GPL-2+: a tapeloop
// binary linked with it is distributed under the GPL, which is why it is
// not the default. The API is the same under both.
package fft3
