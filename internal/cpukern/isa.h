// Which instruction sets this build of the kernels targets: the one place
// that says what is x86-only.
//
// TL_X86 is 1 where the x86-64 kernels (AVX-512, AVX2, SSE2 intrinsics and
// target attributes, chosen at run time by __builtin_cpu_supports) are
// compiled, 0 elsewhere: there every kernel family compiles its portable
// path alone, plain C and GCC vector extensions (which GCC lowers to NEON
// on arm64), at level TL_ISA_BASE (pairdist.h). Defining TL_PORTABLE
// (CGO_CFLAGS=-DTL_PORTABLE) builds the portable paths on x86-64 too, for
// testing them at native speed.
#ifndef TAPELOOP_ISA_H
#define TAPELOOP_ISA_H

#if defined(__x86_64__) && !defined(TL_PORTABLE)
#define TL_X86 1
#include <immintrin.h>
// TL_PREFETCH(p) asks for the cache line at p in all cache levels.
#define TL_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define TL_X86 0
#define TL_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
#endif

// TL_ISA_BASE_NAME names level TL_ISA_BASE: SSE2 is the x86-64 baseline,
// and ASIMD (NEON) that of armv8, which the vector extensions compile to.
#if TL_X86
#define TL_ISA_BASE_NAME "sse2"
#elif defined(__aarch64__)
#define TL_ISA_BASE_NAME "neon"
#else
#define TL_ISA_BASE_NAME "generic"
#endif

#endif
