// Uniform numbers from math/rand/v2's PCG generator, see uniform.c.
#ifndef TAPELOOP_UNIFORM_H
#define TAPELOOP_UNIFORM_H
#include <stdint.h>

// tl_pcg_uniform_f32 and _f64 set dst[i], i < n, to a + span*u_i,
// rounded to the element type, where u_i is the (i+1)-th output of the
// PCG generator in state (hi, lo) (math/rand/v2's rand.NewPCG(hi, lo)),
// its low 53 bits over 2^53 (rand.Rand's Float64): the state steps
// s <- s*mul + inc (mod 2^128), each output is the state after its step
// scrambled by DXSM. The multiply and the add round separately, in
// double, as Go computes a + span*u on amd64. They return 0, or -1
// without writing anything on a CPU without AVX-512 (the caller then uses
// a loop of its own).
int tl_pcg_uniform_f32(int64_t n, float *dst, uint64_t hi, uint64_t lo, double a, double span);
int tl_pcg_uniform_f64(int64_t n, double *dst, uint64_t hi, uint64_t lo, double a, double span);

#endif
