// Fans of rays that share their x and y: the fast paths of tl_drr_fans.
//
// A pose's detector column whose pixels step along z (every pose of an
// orbit about z) is a fan: at any fraction a of the way from the source,
// all its rays have the same x and y, and differ only in z, the volume's
// contiguous axis. Trilinear sampling (fanz) then blends the four x-y
// neighbour columns of voxels once per sample for the whole fan and reads
// each ray's two z neighbours from the blend with contiguous loads and
// permutes; Siddon's path (fan_siddon) merges the x and y plane crossings
// once per fan and walks each ray's own z crossings within them. Both are
// written once, in drr_fan_impl.h, and compiled below for AVX-512 and for
// AVX2 (fanz_avx512, fanz_avx2, …) on x86-64, where fan() picks by
// tl_cpu_isa() and SSE2 goes ray by ray; elsewhere the trilinear path is
// compiled for the baseline alone, with GCC vector extensions (fanz_base:
// NEON on arm64), and Siddon's fans go ray by ray. Every other fan goes
// ray by ray (tl_rays in drr.c).
#include "drr.h"
#include "drr_internal.h"
#include "isa.h"
#include "pairdist.h"
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// FANCH: rays per chunk of a fan, the partial sums of one chunk stay in
// registers and L1; FANPF: how many samples (or segments) ahead to
// prefetch; FANBUF: floats of blended voxel columns per sample.
enum { FANCH = 256, FANPF = 16, FANBUF = 2048 };

// A trilinear fan's geometry in continuous indices (voxel centres at
// integers) of a padded volume: along the shared line X(a) = ax + a*bx,
// Y(a) = ay + a*by; ray i: Z(a) = az + a*(bz + i*gz). Samples k0 … k1 at
// a = (k + 1/2)*da are those with X in [0, nx-1], Y in [0, ny-1] and a in
// [0, 1]: outside, every value read is the zero border.
typedef struct {
  double ax, bx, ay, by, az, bz, gz, da;
  int64_t k0, k1;
  int32_t nx, ny, nz, si, sj;
} fan_geo;

static void fan_geometry(const tl_volume *vol, const double *src, const double *dst0, const double *dd, double step,
                         double lref, fan_geo *g) {
  g->nx = (int32_t)vol->n[0], g->ny = (int32_t)vol->n[1], g->nz = (int32_t)vol->n[2];
  g->si = g->ny * g->nz, g->sj = g->nz;
  g->da = step / lref;
  g->ax = (src[0] - vol->o[0]) / vol->s[0] - 0.5, g->bx = (dst0[0] - src[0]) / vol->s[0];
  g->ay = (src[1] - vol->o[1]) / vol->s[1] - 0.5, g->by = (dst0[1] - src[1]) / vol->s[1];
  g->az = (src[2] - vol->o[2]) / vol->s[2] - 0.5, g->bz = (dst0[2] - src[2]) / vol->s[2];
  g->gz = dd[2] / vol->s[2];
  double lo = 0, hi = 1;
  const double a0s[2] = {g->ax, g->ay}, b0s[2] = {g->bx, g->by}, lim[2] = {g->nx - 1, g->ny - 1};
  for (int q = 0; q < 2; q++) {
    if (b0s[q] == 0) {
      if (a0s[q] < 0 || a0s[q] > lim[q]) lo = 1, hi = 0;
      continue;
    }
    double t0 = (0 - a0s[q]) / b0s[q], t1 = (lim[q] - a0s[q]) / b0s[q];
    if (t0 > t1) { double t = t0; t0 = t1; t1 = t; }
    if (t0 > lo) lo = t0;
    if (t1 < hi) hi = t1;
  }
  g->k0 = (int64_t)ceil(lo / g->da - 0.5), g->k1 = (int64_t)floor(hi / g->da - 0.5);
  if (g->k0 < 0) g->k0 = 0;
}

// fan_cell is the x-y column pair of the fan at a: the offset of its
// (ix, iy) column and the four bilinear weights, clamped to the volume.
static inline int32_t fan_cell(const fan_geo *g, double a, float w[4]) {
  double X = g->ax + a * g->bx, Y = g->ay + a * g->by;
  int32_t ix = (int32_t)floor(X), iy = (int32_t)floor(Y);
  ix = ix < 0 ? 0 : (ix > g->nx - 2 ? g->nx - 2 : ix);
  iy = iy < 0 ? 0 : (iy > g->ny - 2 ? g->ny - 2 : iy);
  float fx = (float)(X - ix), fy = (float)(Y - iy);
  fx = fx < 0 ? 0 : (fx > 1 ? 1 : fx);
  fy = fy < 0 ? 0 : (fy > 1 ? 1 : fy);
  w[0] = (1 - fx) * (1 - fy), w[1] = (1 - fx) * fy, w[2] = fx * (1 - fy), w[3] = fx * fy;
  return ix * g->si + iy * g->sj;
}

// fan_prefetch prefetches the z range [az + a*cmin, az + a*cmax] of the
// four columns at a, unless they are the ones prefetched last: the loads
// follow the ray through memory in a pattern the hardware prefetchers do
// not foresee.
static inline void fan_prefetch(const float *v, const fan_geo *g, double a, double cmin, double cmax,
                                int32_t *last) {
  float w[4];
  int32_t base = fan_cell(g, a, w);
  if (base == *last) return;
  *last = base;
  double za = g->az + a * cmin, zb = g->az + a * cmax;
  int32_t zlo = za < 0 ? 0 : (za > g->nz - 1 ? g->nz - 1 : (int32_t)za);
  int32_t zhi = zb < 0 ? 0 : (zb > g->nz - 1 ? g->nz - 1 : (int32_t)zb);
  const float *q = v + base;
  for (int32_t z = zlo & ~15; z <= zhi + 1; z += 16) {
    TL_PREFETCH(q + z);
    TL_PREFETCH(q + g->sj + z);
    TL_PREFETCH(q + g->si + z);
    TL_PREFETCH(q + g->si + g->sj + z);
  }
}

// fan_write stores the line integrals of rays r0 … r0+m-1 of a fan: the
// sums of their samples acc, each sample weighing da times its ray's length.
static void fan_write(const double *src, const double *dst0, const double *dd, int64_t r0, int m, const double *acc,
                      double da, float *out, int64_t ostride) {
  for (int i = 0; i < m; i++) {
    double d[3] = {dst0[0] - src[0], dst0[1] - src[1], dst0[2] + (double)(r0 + i) * dd[2] - src[2]};
    double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    out[(r0 + i) * ostride] = len == 0 ? 0 : (float)(acc[i] * da * len);
  }
}

#if TL_X86 // Siddon's helpers and the fan paths for x86-64, to the end of the AVX2 path

// fan_segments merges the crossings of the ray src + a*d2 (d2 in x and y
// only: the line a fan of rays stepping along z shares) with the x and y
// voxel planes: segment s runs from seg[s] to seg[s+1] in the x-y column of
// voxels at offset cell[s]. It returns the number of segments (at most
// nx + ny + 1; 0 when the line misses the volume) and the line's a range
// inside the volume in x and y.
static int64_t fan_segments(const tl_volume *vol, const double *src, const double *d2, double *seg, int64_t *cell,
                            double *amin_out, double *amax_out) {
  int64_t nseg = 0;
  double amin = 0, amax = 0;
  if (tl_clip(vol, src, d2, 2, &amin, &amax)) {
    double next[2], inc[2];
    int64_t idx[2];
    for (int ax = 0; ax < 2; ax++) tl_axis_start(vol, ax, src, d2, amin, &next[ax], &inc[ax], &idx[ax]);
    const int64_t stride[2] = {vol->n[1] * vol->n[2], vol->n[2]};
    int64_t step[2], left[2], off = idx[0] * stride[0] + idx[1] * stride[1];
    for (int ax = 0; ax < 2; ax++) {
      step[ax] = d2[ax] > 0 ? stride[ax] : -stride[ax];
      left[ax] = d2[ax] > 0 ? vol->n[ax] - 1 - idx[ax] : idx[ax];
    }
    double a = amin;
    seg[0] = a;
    for (;;) {
      int ax = next[1] < next[0] ? 1 : 0;
      double b = next[ax] < amax ? next[ax] : amax;
      cell[nseg] = off;
      seg[++nseg] = b; // segment s runs from seg[s] to seg[s+1] in column cell[s]
      if (b >= amax) break;
      int out_of_box = 0;
      for (int q = 0; q < 2; q++) {
        if (next[q] <= b) {
          if (left[q] == 0) out_of_box = 1;
          left[q]--;
          off += step[q];
          next[q] += inc[q];
        }
      }
      if (out_of_box) break;
    }
  }
  *amin_out = amin;
  *amax_out = amax;
  return nseg;
}

// fan_lane is ray i's a range [lo, hi] inside the volume along z, within
// the fan's x-y range [amin, amax], for its z step dz; it returns whether
// the range is not empty.
static int fan_lane(const tl_volume *vol, const double *src, double dz, double amin, double amax, double *lo,
                    double *hi) {
  const double oz = vol->o[2], top = vol->o[2] + vol->n[2] * vol->s[2];
  *lo = amin;
  *hi = amax;
  if (dz == 0) return src[2] >= oz && src[2] < top && amin < amax;
  double t0 = (oz - src[2]) / dz, t1 = (top - src[2]) / dz;
  if (t0 > t1) { double t = t0; t0 = t1; t1 = t; }
  if (t0 > *lo) *lo = t0;
  if (t1 < *hi) *hi = t1;
  return *lo < *hi;
}

// The fan paths for AVX-512: 16 floats (trilinear) or 8 doubles (Siddon)
// per vector, lanes selected by mask registers. With two-vector permutes
// and gathers of 8-byte voxel pairs, a vector of trilinear rays close in z
// reads its window from the columns by loads even in a chunk too tall to
// blend in advance; Siddon's path keeps its voxel indices as int64, reads a
// vector's voxels with one load and a permute where they lie within 16 of
// each other, and goes FANCH rays at a time, prefetching.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,bmi2")
#define SFX(x) x##_avx512
#define W 16
#define VF __m512
#define VI __m512i
#define FM __mmask16
#define LM __mmask16
#define F_SET1 _mm512_set1_ps
#define F_ZERO _mm512_setzero_ps
#define F_LOADU _mm512_loadu_ps
#define F_STOREU _mm512_storeu_ps
#define F_FMADD _mm512_fmadd_ps
#define F_MIN _mm512_min_ps
#define F_MAX _mm512_max_ps
#define F_CMP _mm512_cmp_ps_mask
#define F_TRUNC _mm512_cvttps_epi32
#define F_FROMI _mm512_cvtepi32_ps
#define F_MLOAD(p, lm) _mm512_maskz_loadu_ps(lm, p)
#define F_GATHER(p, i, fm) _mm512_mask_i32gather_ps(_mm512_setzero_ps(), fm, i, p, 4)
#define F_ADDWHERE(a, fm, b) _mm512_mask_add_ps(a, fm, a, b)
#define PICK2 _mm512_permutex2var_ps
#define I_SET1 _mm512_set1_epi32
#define I_ADD _mm512_add_epi32
#define I_SUB _mm512_sub_epi32
#define I_MIN _mm512_min_epi32
#define FM_AND(a, b) ((a) & (b))
#define FM_NONE(m) (!(m))
#define FM_FIRST first_avx512
#define LM_NONE ((__mmask16)0)
#define COLUMN_WINDOW 1
#define WD 8
#define VD __m512d
#define MD __mmask8
#define KT __m512i
#define D_SET1 _mm512_set1_pd
#define D_ZERO _mm512_setzero_pd
#define D_LOADU _mm512_loadu_pd
#define D_STOREU _mm512_storeu_pd
#define D_FMADD _mm512_fmadd_pd
#define D_MIN _mm512_min_pd
#define D_MAX _mm512_max_pd
#define D_CMP _mm512_cmp_pd_mask
#define D_BLEND(m, a, b) _mm512_mask_blend_pd(m, a, b)
#define MD_AND(a, b) ((a) & (b))
#define MD_NONE(m) (!(m))
#define K_SET1 _mm512_set1_epi64
#define K_ADD _mm512_add_epi64
#define K_BLEND(m, a, b) _mm512_mask_blend_epi64(m, a, b)
#define FAN_SIDDON 1
#define SIDDON_RAYS FANCH
#define SIDDON_PREFETCH 1

static inline __mmask16 first_avx512(int64_t n) { return n >= 16 ? 0xFFFF : (__mmask16)_bzhi_u32(0xFFFF, (unsigned)n); }

// Rays further apart in z than a window: each voxel is gathered with its z
// neighbour as one 8-byte element, per column.
static inline __attribute__((always_inline)) void columns_avx512(const float *v, __m512i idx, __mmask16 in,
                                                                 const int32_t offs[4], const __m512 ws[4],
                                                                 __m512 *c0, __m512 *c1) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  idx = _mm512_maskz_mov_epi32(in, idx);
  const __m256i ilo = _mm512_castsi512_si256(idx), ihi = _mm512_extracti64x4_epi64(idx, 1);
  const __mmask8 mlo = (__mmask8)in, mhi = (__mmask8)(in >> 8);
  *c0 = *c1 = _mm512_setzero_ps();
  for (int q = 0; q < 4; q++) {
    const __m256i o = _mm256_set1_epi32(offs[q]);
    __m512 ga = _mm512_castpd_ps(_mm512_mask_i32gather_pd(_mm512_setzero_pd(), mlo, _mm256_add_epi32(ilo, o), v, 4));
    __m512 gb = _mm512_castpd_ps(_mm512_mask_i32gather_pd(_mm512_setzero_pd(), mhi, _mm256_add_epi32(ihi, o), v, 4));
    *c0 = _mm512_fmadd_ps(ws[q], _mm512_permutex2var_ps(ga, even, gb), *c0);
    *c1 = _mm512_fmadd_ps(ws[q], _mm512_permutex2var_ps(ga, odd, gb), *c1);
  }
}

static inline __m512i voxel_at_avx512(__m512d z, __mmask8 down, __m512i kmax) {
  const __m512d kf = _mm512_mask_sub_pd(_mm512_roundscale_pd(z, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), down,
                                        _mm512_roundscale_pd(z, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC),
                                        _mm512_set1_pd(1));
  return _mm512_min_epi64(_mm512_max_epi64(_mm512_cvttpd_epi64(kf), _mm512_setzero_si512()), kmax);
}

static inline __m512d plane_avx512(__m512i k, __mmask8 up) {
  return _mm512_cvtepi64_pd(_mm512_mask_add_epi64(k, up, k, _mm512_set1_epi64(1)));
}

static inline __mmask8 inside_avx512(__m512i k, __m512i kmax) {
  return _mm512_cmp_epi64_mask(k, _mm512_setzero_si512(), _MM_CMPINT_NLT) &
         _mm512_cmp_epi64_mask(k, kmax, _MM_CMPINT_LE);
}

// The lanes' voxels mostly lie within 16 of the lowest: one load and a
// permute, else a gather.
static inline __m512d add_voxel_avx512(__m512d acc, __mmask8 on, __m512d piece, const float *cp, __m512i k,
                                       int64_t nz) {
  const int64_t klo = _mm512_mask_reduce_min_epi64(on, k);
  const __m512i rel = _mm512_sub_epi64(k, _mm512_set1_epi64(klo));
  __m256 val;
  if ((_mm512_cmp_epu64_mask(rel, _mm512_set1_epi64(15), _MM_CMPINT_LE) & on) == on) {
    const __m512 w = _mm512_maskz_loadu_ps(first_avx512(nz - klo), cp + klo);
    val = _mm512_castps512_ps256(_mm512_permutexvar_ps(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(rel)), w));
  } else {
    val = _mm512_mask_i64gather_ps(_mm256_setzero_ps(), on, k, cp, 4);
  }
  return _mm512_mask3_fmadd_pd(piece, _mm512_cvtps_pd(val), acc, on);
}

#include "drr_fan_impl.h"
#include "drr_fan_undef.h"
#pragma GCC pop_options

// The fan paths for AVX2: 8 floats or 4 doubles per vector, lanes selected
// by all-ones elements. A chunk of trilinear rays too tall to blend in
// advance gathers every voxel; Siddon's path keeps its voxel indices as
// doubles (exact for any volume), gathers every value, goes 4 rays at a
// time, and needs a volume of fewer than 2^31 voxels.
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define SFX(x) x##_avx2
#define W 8
#define VF __m256
#define VI __m256i
#define FM __m256
#define LM __m256i
#define F_SET1 _mm256_set1_ps
#define F_ZERO _mm256_setzero_ps
#define F_LOADU _mm256_loadu_ps
#define F_STOREU _mm256_storeu_ps
#define F_FMADD _mm256_fmadd_ps
#define F_MIN _mm256_min_ps
#define F_MAX _mm256_max_ps
#define F_CMP _mm256_cmp_ps
#define F_TRUNC _mm256_cvttps_epi32
#define F_FROMI _mm256_cvtepi32_ps
#define F_MLOAD _mm256_maskload_ps
#define F_GATHER(p, i, fm) _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, i, fm, 4)
#define F_ADDWHERE(a, fm, b) _mm256_add_ps(a, _mm256_and_ps(fm, b))
#define PICK2 pick2_avx2
#define I_SET1 _mm256_set1_epi32
#define I_ADD _mm256_add_epi32
#define I_SUB _mm256_sub_epi32
#define I_MIN _mm256_min_epi32
#define FM_AND _mm256_and_ps
#define FM_NONE(m) _mm256_testz_ps(m, m)
#define FM_FIRST(n) _mm256_castsi256_ps(first_avx2(n))
#define LM_NONE _mm256_setzero_si256()
#define COLUMN_WINDOW 0
#define WD 4
#define VD __m256d
#define MD __m256d
#define KT __m256d
#define D_SET1 _mm256_set1_pd
#define D_ZERO _mm256_setzero_pd
#define D_LOADU _mm256_loadu_pd
#define D_STOREU _mm256_storeu_pd
#define D_FMADD _mm256_fmadd_pd
#define D_MIN _mm256_min_pd
#define D_MAX _mm256_max_pd
#define D_CMP _mm256_cmp_pd
#define D_BLEND(m, a, b) _mm256_blendv_pd(a, b, m)
#define MD_AND _mm256_and_pd
#define MD_NONE(m) _mm256_testz_pd(m, m)
#define K_SET1(x) _mm256_set1_pd((double)(x))
#define K_ADD _mm256_add_pd
#define K_BLEND(m, a, b) _mm256_blendv_pd(a, b, m)
#define FAN_SIDDON 1
#define SIDDON_RAYS 4
#define SIDDON_PREFETCH 0

static inline __m256i first_avx2(int32_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Element i of the 16 floats lo, hi: from lo or hi, each permuted by the
// low 3 bits of i.
static inline __m256 pick2_avx2(__m256 lo, __m256i i, __m256 hi) {
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, i), _mm256_permutevar8x32_ps(hi, i),
                          _mm256_castsi256_ps(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(7))));
}

static inline __attribute__((always_inline)) void columns_avx2(const float *v, __m256i idx, __m256 in,
                                                               const int32_t offs[4], const __m256 ws[4], __m256 *c0,
                                                               __m256 *c1) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256i one = _mm256_set1_epi32(1);
  *c0 = *c1 = zero;
  for (int q = 0; q < 4; q++) {
    const __m256i o = _mm256_add_epi32(idx, _mm256_set1_epi32(offs[q]));
    *c0 = _mm256_fmadd_ps(ws[q], _mm256_mask_i32gather_ps(zero, v, o, in, 4), *c0);
    *c1 = _mm256_fmadd_ps(ws[q], _mm256_mask_i32gather_ps(zero, v, _mm256_add_epi32(o, one), in, 4), *c1);
  }
}

static inline __m256d voxel_at_avx2(__m256d z, __m256d down, __m256d kmax) {
  const __m256d k = _mm256_blendv_pd(_mm256_round_pd(z, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                                     _mm256_round_pd(z, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC) - _mm256_set1_pd(1),
                                     down);
  return _mm256_min_pd(_mm256_max_pd(k, _mm256_setzero_pd()), kmax);
}

static inline __m256d plane_avx2(__m256d k, __m256d up) { return _mm256_blendv_pd(k, k + _mm256_set1_pd(1), up); }

static inline __m256d inside_avx2(__m256d k, __m256d kmax) {
  return _mm256_and_pd(_mm256_cmp_pd(k, _mm256_setzero_pd(), _CMP_GE_OQ), _mm256_cmp_pd(k, kmax, _CMP_LE_OQ));
}

static inline __m256d add_voxel_avx2(__m256d acc, __m256d on, __m256d piece, const float *cp, __m256d k, int64_t nz) {
  (void)nz;
  const __m128 val = _mm_mask_i32gather_ps(_mm_setzero_ps(), cp, _mm256_cvttpd_epi32(_mm256_and_pd(on, k)),
                                           _mm256_cvtpd_ps(on), 4);
  return _mm256_fmadd_pd(_mm256_and_pd(on, piece), _mm256_cvtps_pd(val), acc);
}

#include "drr_fan_impl.h"
#include "drr_fan_undef.h"
#pragma GCC pop_options
#else // ---- the baseline of other architectures: GCC vector extensions (NEON on arm64) ----

// The trilinear fan path for the baseline: 4 floats per vector (a NEON
// register), lanes selected by all-ones elements. A masked load's mask is
// a count of lanes (LM, an int): one vector load where every lane is in,
// else lane by lane; PICK2 is TBL on arm64, and
// what x86 gathers is read lane by lane. Siddon's fans go ray by ray here:
// two doubles a vector do not pay for the fan's work per segment (built
// so on x86-64, the path was slower than the rays one by one).
#if defined(__aarch64__)
#include <arm_neon.h>
#endif
typedef float vf4_base __attribute__((vector_size(16)));
typedef int32_t vi4_base __attribute__((vector_size(16)));

static inline vf4_base set1_f_base(float x) { return (vf4_base){x, x, x, x}; }
static inline vi4_base set1_i_base(int32_t x) { return (vi4_base){x, x, x, x}; }
static inline vf4_base loadu_f_base(const float *p) {
  vf4_base v;
  memcpy(&v, p, sizeof(v));
  return v;
}
static inline void storeu_f_base(float *p, vf4_base v) { memcpy(p, &v, sizeof(v)); }
// The minimum and maximum take the second operand where the first is NaN
// or the two are equal, as x86's do.
static inline vf4_base min_f_base(vf4_base a, vf4_base b) {
  const vi4_base m = a < b;
  return (vf4_base)((m & (vi4_base)a) | (~m & (vi4_base)b));
}
static inline vf4_base max_f_base(vf4_base a, vf4_base b) {
  const vi4_base m = a > b;
  return (vf4_base)((m & (vi4_base)a) | (~m & (vi4_base)b));
}
static inline vi4_base min_i_base(vi4_base a, vi4_base b) {
  const vi4_base m = a < b;
  return (m & a) | (~m & b);
}
static inline int none4_base(vi4_base m) {
  typedef int64_t vk2 __attribute__((vector_size(16)));
  const vk2 x = (vk2)m;
  return !(x[0] | x[1]);
}
static inline int first_base(int32_t n) { return n; }
// A masked load of the first lm floats at p, the others zero: one vector
// load when every lane is in, else lane by lane, so that nothing past
// p + lm is read.
static inline vf4_base mload_base(const float *p, int lm) {
  if (lm >= 4) return loadu_f_base(p);
  vf4_base v = {0, 0, 0, 0};
  for (int l = 0; l < lm; l++) v[l] = p[l];
  return v;
}
// Element i (< 8) of lo followed by hi: on arm64 one TBL over the two
// registers, from byte indices 4i, 4i+1, 4i+2, 4i+3 (GCC 12 lowers a
// shuffle by a variable mask lane by lane, through memory); elsewhere
// GCC's shuffle.
static inline vf4_base pick2_base(vf4_base lo, vi4_base i, vf4_base hi) {
#if defined(__aarch64__)
  typedef uint32_t vu4 __attribute__((vector_size(16)));
  const uint8x16x2_t t = {{(uint8x16_t)lo, (uint8x16_t)hi}};
  return (vf4_base)vqtbl2q_u8(t, (uint8x16_t)((vu4)i * 0x04040404u + 0x03020100u));
#else
  return __builtin_shuffle(lo, hi, i);
#endif
}
static inline vf4_base gather_base(const float *p, vi4_base i, vi4_base fm) {
  i &= fm;
  const vf4_base v = {p[i[0]], p[i[1]], p[i[2]], p[i[3]]};
  return (vf4_base)((vi4_base)v & fm);
}
#define SFX(x) x##_base
#define W 4
#define VF vf4_base
#define VI vi4_base
#define FM vi4_base
#define LM int
#define F_SET1 set1_f_base
#define F_ZERO() ((vf4_base){0, 0, 0, 0})
#define F_LOADU loadu_f_base
#define F_STOREU storeu_f_base
#define F_FMADD(a, b, c) ((a) * (b) + (c))
#define F_MIN min_f_base
#define F_MAX max_f_base
// F_CMP names x86's predicate (_CMP_GE_OQ, _CMP_LE_OQ), which selects
// GCC's comparison: ordered, as x86's.
#define F_CMP(a, b, p) CMP_BASE##p(a, b)
#define CMP_BASE_CMP_GE_OQ(a, b) ((a) >= (b))
#define CMP_BASE_CMP_LE_OQ(a, b) ((a) <= (b))
#define F_TRUNC(v) __builtin_convertvector(v, vi4_base)
#define F_FROMI(v) __builtin_convertvector(v, vf4_base)
#define F_MLOAD mload_base
#define F_GATHER gather_base
#define F_ADDWHERE(a, fm, b) ((a) + (vf4_base)((vi4_base)(b) & (fm)))
#define PICK2 pick2_base
#define I_SET1 set1_i_base
#define I_ADD(a, b) ((a) + (b))
#define I_SUB(a, b) ((a) - (b))
#define I_MIN min_i_base
#define FM_AND(a, b) ((a) & (b))
#define FM_NONE none4_base
#define FM_FIRST(n) ((vi4_base){0, 1, 2, 3} < set1_i_base(n))
#define LM_NONE 0
#define COLUMN_WINDOW 1
#define FAN_SIDDON 0

// Rays further apart in z than a window, in a chunk too tall to blend in
// advance: each ray's voxels lane by lane.
static inline void columns_base(const float *v, vi4_base idx, vi4_base in, const int32_t offs[4], const vf4_base ws[4],
                                vf4_base *c0, vf4_base *c1) {
  idx &= in;
  vf4_base a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
  for (int q = 0; q < 4; q++) {
    vf4_base lo, hi;
    for (int l = 0; l < 4; l++) {
      const float *p = v + idx[l] + offs[q];
      lo[l] = p[0];
      hi[l] = p[1];
    }
    a = ws[q] * lo + a;
    b = ws[q] * hi + b;
  }
  *c0 = a;
  *c1 = b;
}

#include "drr_fan_impl.h"
#include "drr_fan_undef.h"
#undef CMP_BASE_CMP_GE_OQ
#undef CMP_BASE_CMP_LE_OQ
#endif

// fan renders one fan; seg and cell are scratch for Siddon's x-y segments,
// n[0] + n[1] + 4 entries (seg one more), or NULL.
static void fan(const tl_volume *vol, int padded, const tl_fan *f, float *out, double step, double *seg,
                int64_t *cell) {
#if TL_X86 // the selector of the fan paths
  const int isa = tl_cpu_isa();
  const int along = f->dd[0] == 0 && f->dd[1] == 0, small = vol->n[0] * vol->n[1] * vol->n[2] < ((int64_t)1 << 31) - 1;
  if (step > 0 && f->lref > 0 && padded && along && vol->n[2] >= 2 && small && isa >= TL_ISA_AVX2) {
    if (isa == TL_ISA_AVX512)
      fanz_avx512(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, step, f->lref);
    else
      fanz_avx2(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, step, f->lref);
    return;
  }
  if (step <= 0 && along && seg && (isa == TL_ISA_AVX512 || (isa == TL_ISA_AVX2 && small))) {
    if (isa == TL_ISA_AVX512)
      fan_siddon_avx512(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, seg, cell);
    else
      fan_siddon_avx2(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, seg, cell);
    return;
  }
#else // the baseline's fan path: trilinear
  const int along = f->dd[0] == 0 && f->dd[1] == 0, small = vol->n[0] * vol->n[1] * vol->n[2] < ((int64_t)1 << 31) - 1;
  if (step > 0 && f->lref > 0 && padded && along && vol->n[2] >= 2 && small) {
    fanz_base(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, step, f->lref);
    return;
  }
#endif
  // Any other fan: ray by ray, in groups of 16 end points.
  double ss[3 * 16], d[3 * 16];
  for (int l = 0; l < 16; l++)
    for (int a = 0; a < 3; a++) ss[3 * l + a] = f->src[a];
  for (int64_t r = 0; r < f->n; r += 16) {
    int nr = f->n - r < 16 ? (int)(f->n - r) : 16;
    for (int l = 0; l < nr; l++)
      for (int a = 0; a < 3; a++) d[3 * l + a] = f->dst0[a] + (double)(r + l) * f->dd[a];
    tl_rays(vol, padded, nr, ss, d, out + r * f->stride, f->stride, step, f->lref);
  }
}

void tl_drr_fans(const float *v, const int64_t *n, const double *o, const double *s, int padded, const tl_fan *fans,
                 int64_t nfans, float *out, double step) {
  tl_volume vol = {v, {n[0], n[1], n[2]}, {o[0], o[1], o[2]}, {s[0], s[1], s[2]}};
  // Scratch for Siddon's x-y segments, shared by the fans: at most one per
  // plane. Without it (out of memory, or no Siddon fan path) the fans go
  // ray by ray.
  double *seg = NULL;
  int64_t *cell = NULL;
  if (step <= 0 && TL_X86) {
    int64_t most = n[0] + n[1] + 4;
    seg = malloc(sizeof(double) * (most + 1));
    cell = malloc(sizeof(int64_t) * most);
    if (!seg || !cell) {
      free(seg);
      free(cell);
      seg = NULL;
      cell = NULL;
    }
  }
  for (int64_t i = 0; i < nfans; i++)
    if (fans[i].n > 0) fan(&vol, padded, &fans[i], out + fans[i].off, step, seg, cell);
  free(seg);
  free(cell);
}

void tl_fan_layout(int64_t *out) {
  out[0] = sizeof(tl_fan);
  out[1] = offsetof(tl_fan, dst0);
  out[2] = offsetof(tl_fan, n);
  out[3] = offsetof(tl_fan, off);
  out[4] = offsetof(tl_fan, lref);
}
