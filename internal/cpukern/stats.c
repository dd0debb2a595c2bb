// Sums and maxima in a fixed order: eight partial sums in the lanes of
// vectors of doubles, so that the additions of a long sum run as
// independent chains. GCC vector extensions do not reassociate: the order
// is the one stats.h states on every instruction set. On x86-64 the loop
// is also built for AVX2 (two 4-lane registers instead of four 2-lane
// ones), chosen at the AVX2 level and above (tl_cpu_isa).
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "isa.h"
#include "pairdist.h"
#include "stats.h"

typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef int64_t v4l __attribute__((vector_size(32)));

// LARGER(f, m) is f where f > m, else m (so a NaN f leaves m).
#define LARGER(f, m) ((v4d)((((f) > (m)) & (v4l)(f)) | (~((f) > (m)) & (v4l)(m))))

// SUM_MAX is the loop over the whole groups of eight: lane k of lo and hi
// holds the partial sums k and k + 4, of ma and mb their maxima. LOAD(p)
// is the four elements at p as a v4d.
#define SUM_MAX(LOAD)                                                                                    \
    v4d lo = {0, 0, 0, 0}, hi = lo;                                                                      \
    v4d ma = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, mb = ma;                                      \
    int64_t i = 0;                                                                                       \
    for (; i + 8 <= n; i += 8) {                                                                         \
        v4d f = LOAD(x + i), g = LOAD(x + i + 4);                                                        \
        lo += f;                                                                                         \
        hi += g;                                                                                         \
        ma = LARGER(f, ma);                                                                              \
        mb = LARGER(g, mb);                                                                              \
    }                                                                                                    \
    double s[8], m[8];                                                                                   \
    memcpy(s, &lo, sizeof lo);                                                                           \
    memcpy(s + 4, &hi, sizeof hi);                                                                       \
    memcpy(m, &ma, sizeof ma);                                                                           \
    memcpy(m + 4, &mb, sizeof mb);                                                                       \
    return finish(s, m, x + i, n - i);

// LOAD_F32 and LOAD_F64 are the four elements at p as a v4d (macros, not
// functions: a v4d is not passed by value without AVX).
#define LOAD_F32(p)                                                                                      \
    ({                                                                                                   \
        v4f v_;                                                                                          \
        memcpy(&v_, (p), sizeof v_);                                                                     \
        __builtin_convertvector(v_, v4d);                                                                \
    })
#define LOAD_F64(p)                                                                                      \
    ({                                                                                                   \
        v4d v_;                                                                                          \
        memcpy(&v_, (p), sizeof v_);                                                                     \
        v_;                                                                                              \
    })

// FINISH adds the tail (fewer than eight) into its lanes, then the lanes
// in stats.h's order, and takes the largest maximum.
#define FINISH(T)                                                                                        \
    static tl_sum_max finish_##T(double *s, double *m, const T *tail, int64_t nt) {                      \
        for (int64_t j = 0; j < nt; j++) {                                                               \
            double f = tail[j];                                                                          \
            s[j] += f;                                                                                   \
            m[j] = f > m[j] ? f : m[j];                                                                  \
        }                                                                                                \
        tl_sum_max r = {((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])), m[0]};        \
        for (int k = 1; k < 8; k++) r.max = m[k] > r.max ? m[k] : r.max;                                 \
        return r;                                                                                        \
    }
FINISH(float)
FINISH(double)

#define finish(s, m, tail, nt) _Generic((tail), const float *: finish_float, const double *: finish_double)(s, m, tail, nt)

static tl_sum_max sum_max_f32(const float *x, int64_t n) { SUM_MAX(LOAD_F32) }
static tl_sum_max sum_max_f64(const double *x, int64_t n) { SUM_MAX(LOAD_F64) }

#if TL_X86
#pragma GCC push_options
#pragma GCC target("avx2")
static tl_sum_max sum_max_f32_avx2(const float *x, int64_t n) { SUM_MAX(LOAD_F32) }
static tl_sum_max sum_max_f64_avx2(const double *x, int64_t n) { SUM_MAX(LOAD_F64) }
#pragma GCC pop_options
#endif

tl_sum_max tl_sum_max_f32(const float *x, int64_t n) {
#if TL_X86
    if (tl_cpu_isa() >= TL_ISA_AVX2) return sum_max_f32_avx2(x, n);
#endif
    return sum_max_f32(x, n);
}

tl_sum_max tl_sum_max_f64(const double *x, int64_t n) {
#if TL_X86
    if (tl_cpu_isa() >= TL_ISA_AVX2) return sum_max_f64_avx2(x, n);
#endif
    return sum_max_f64(x, n);
}
