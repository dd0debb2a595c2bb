// Uniform numbers from math/rand/v2's PCG generator (a 128-bit linear
// congruential generator with the DXSM output function), 16 outputs at a
// time on AVX-512: lane l of two vectors holds the state after l+1 steps,
// and every lane then jumps 16 steps at once (the map s <- s*mul + inc
// composed 16 times is another such map). The 64x64-bit products of the
// state's 128-bit multiplication are VPMULLQ for their low halves and
// four 32x32-bit products for the one high half the step needs. The
// floating-point steps use the intrinsics with an explicit rounding mode,
// which the compiler never fuses into an FMA: the results are those of Go
// bit for bit.
#include "uniform.h"
#include "isa.h"
#include "pairdist.h"
#include <stdint.h>
#include <string.h>

#if TL_X86 // the AVX-512 kernel; elsewhere the callers generate the numbers in Go
typedef unsigned __int128 u128;

#define PCG_MUL (((u128)2549297995355413924ULL << 64) | 4865540595714422341ULL)
#define PCG_INC (((u128)6364136223846793005ULL << 64) | 1442695040888963407ULL)

// pcg_jump sets *mul and *inc to the map of k steps: s <- s*mul + inc.
static void pcg_jump(uint64_t k, u128 *mul, u128 *inc) {
  u128 am = 1, ac = 0, m = PCG_MUL, c = PCG_INC;
  for (; k; k >>= 1) {
    if (k & 1) {
      am *= m;
      ac = ac * m + c;
    }
    c = (m + 1) * c;
    m *= m;
  }
  *mul = am;
  *inc = ac;
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq")

// mulhi_avx512 is the high 64 bits of a*b, per lane; bh is b >> 32.
static inline __m512i mulhi_avx512(__m512i a, __m512i b, __m512i bh) {
  const __m512i m32 = _mm512_set1_epi64(0xffffffff);
  const __m512i ah = _mm512_srli_epi64(a, 32);
  const __m512i p00 = _mm512_mul_epu32(a, b), p01 = _mm512_mul_epu32(a, bh);
  const __m512i p10 = _mm512_mul_epu32(ah, b), p11 = _mm512_mul_epu32(ah, bh);
  __m512i mid = _mm512_add_epi64(_mm512_srli_epi64(p00, 32), _mm512_and_si512(p01, m32));
  mid = _mm512_add_epi64(mid, _mm512_and_si512(p10, m32));
  __m512i h = _mm512_add_epi64(p11, _mm512_srli_epi64(p01, 32));
  h = _mm512_add_epi64(h, _mm512_srli_epi64(p10, 32));
  return _mm512_add_epi64(h, _mm512_srli_epi64(mid, 32));
}

#define RN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

// pcg_vec is 8 lanes of generator states.
typedef struct {
  __m512i hi, lo;
} pcg_vec;

// pcg_map is the map s <- s*mul + inc in every lane; mlh is mul's low
// half shifted right by 32.
typedef struct {
  __m512i ml, mlh, mh, il, ih;
} pcg_map;

static inline pcg_vec pcg_apply_avx512(pcg_vec s, const pcg_map *m) {
  __m512i h = mulhi_avx512(s.lo, m->ml, m->mlh);
  h = _mm512_add_epi64(h, _mm512_mullo_epi64(s.hi, m->ml));
  h = _mm512_add_epi64(h, _mm512_mullo_epi64(s.lo, m->mh));
  h = _mm512_add_epi64(h, m->ih);
  const __m512i lo = _mm512_add_epi64(_mm512_mullo_epi64(s.lo, m->ml), m->il);
  const __mmask8 carry = _mm512_cmplt_epu64_mask(lo, m->il);
  return (pcg_vec){_mm512_mask_add_epi64(h, carry, h, _mm512_set1_epi64(1)), lo};
}

// pcg_uniform_avx512 is a + span*u for the outputs of the 8 states s.
static inline __m512d pcg_uniform_avx512(pcg_vec s, __m512d a, __m512d span) {
  __m512i x = _mm512_xor_si512(s.hi, _mm512_srli_epi64(s.hi, 32));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64((int64_t)0xda942042e4dd58b5ULL));
  x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 48));
  x = _mm512_mullo_epi64(x, _mm512_or_si512(s.lo, _mm512_set1_epi64(1)));
  // exact: below 2^53
  __m512d u = _mm512_cvtepi64_pd(_mm512_and_si512(x, _mm512_set1_epi64((int64_t)((1ULL << 53) - 1))));
  u = _mm512_mul_round_pd(u, _mm512_set1_pd(0x1p-53), RN);
  return _mm512_add_round_pd(a, _mm512_mul_round_pd(span, u, RN), RN);
}

// UNIFORM_AVX512 defines NAME, which writes the n values 16 at a time
// from two vectors of states (two chains of multiplications to overlap),
// each vector through STORE, the last k < 16 through a copy.
#define UNIFORM_AVX512(T, NAME, STORE)                                                        \
  static void NAME(int64_t n, T *dst, uint64_t hi, uint64_t lo, double a, double span) {     \
    u128 s = ((u128)hi << 64) | lo, mul, inc;                                                 \
    uint64_t shi[16], slo[16];                                                                \
    for (int l = 0; l < 16; l++) {                                                            \
      s = s * PCG_MUL + PCG_INC;                                                              \
      shi[l] = (uint64_t)(s >> 64);                                                           \
      slo[l] = (uint64_t)s;                                                                   \
    }                                                                                         \
    pcg_jump(16, &mul, &inc);                                                                 \
    const __m512i ml = _mm512_set1_epi64((int64_t)(uint64_t)mul);                             \
    const pcg_map m = {ml, _mm512_srli_epi64(ml, 32), _mm512_set1_epi64((int64_t)(uint64_t)(mul >> 64)), \
                       _mm512_set1_epi64((int64_t)(uint64_t)inc), _mm512_set1_epi64((int64_t)(uint64_t)(inc >> 64))}; \
    pcg_vec s0 = {_mm512_loadu_si512(shi), _mm512_loadu_si512(slo)};                          \
    pcg_vec s1 = {_mm512_loadu_si512(shi + 8), _mm512_loadu_si512(slo + 8)};                  \
    const __m512d va = _mm512_set1_pd(a), vs = _mm512_set1_pd(span);                          \
    int64_t i = 0;                                                                            \
    for (; i + 16 <= n; i += 16) {                                                            \
      STORE(dst + i, pcg_uniform_avx512(s0, va, vs));                                         \
      STORE(dst + i + 8, pcg_uniform_avx512(s1, va, vs));                                     \
      s0 = pcg_apply_avx512(s0, &m);                                                          \
      s1 = pcg_apply_avx512(s1, &m);                                                          \
    }                                                                                         \
    if (i < n) {                                                                              \
      T tail[16];                                                                             \
      STORE(tail, pcg_uniform_avx512(s0, va, vs));                                            \
      STORE(tail + 8, pcg_uniform_avx512(s1, va, vs));                                        \
      memcpy(dst + i, tail, (size_t)(n - i) * sizeof(T));                                     \
    }                                                                                         \
  }

#define STORE_F32(p, v) _mm256_storeu_ps((p), _mm512_cvt_roundpd_ps((v), RN))
#define STORE_F64(p, v) _mm512_storeu_pd((p), (v))
UNIFORM_AVX512(float, uniform_f32_avx512, STORE_F32)
UNIFORM_AVX512(double, uniform_f64_avx512, STORE_F64)

#pragma GCC pop_options

static int has_avx512dq(void) {
  static int dq = -1;
  if (dq < 0) {
    __builtin_cpu_init();
    dq = __builtin_cpu_supports("avx512dq");
  }
  return dq;
}

int tl_pcg_uniform_f32(int64_t n, float *dst, uint64_t hi, uint64_t lo, double a, double span) {
  if (tl_cpu_isa() != TL_ISA_AVX512 || !has_avx512dq()) return -1;
  uniform_f32_avx512(n, dst, hi, lo, a, span);
  return 0;
}

int tl_pcg_uniform_f64(int64_t n, double *dst, uint64_t hi, uint64_t lo, double a, double span) {
  if (tl_cpu_isa() != TL_ISA_AVX512 || !has_avx512dq()) return -1;
  uniform_f64_avx512(n, dst, hi, lo, a, span);
  return 0;
}

#else
int tl_pcg_uniform_f32(int64_t n, float *dst, uint64_t hi, uint64_t lo, double a, double span) { return -1; }
int tl_pcg_uniform_f64(int64_t n, double *dst, uint64_t hi, uint64_t lo, double a, double span) { return -1; }
#endif
