// Fans of rays that share their x and y: the fast paths of tl_drr_fans.
//
// A pose's detector column whose pixels step along z (every pose of an
// orbit about z) is a fan: at any fraction a of the way from the source,
// all its rays have the same x and y, and differ only in z, the volume's
// contiguous axis. Trilinear sampling (fanz, fanz8) then blends the four
// x-y neighbour columns of voxels once per sample for the whole fan and
// reads each ray's two z neighbours from the blend with contiguous loads
// and permutes; Siddon's path (fan_siddon, fan_siddon4) merges the x and y
// plane crossings once per fan and walks each ray's own z crossings within
// them. Everything else goes ray by ray (tl_rays in drr.c).
#include "drr.h"
#include "drr_internal.h"
#include "pairdist.h"
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

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
    _mm_prefetch((const char *)(q + z), _MM_HINT_T0);
    _mm_prefetch((const char *)(q + g->sj + z), _MM_HINT_T0);
    _mm_prefetch((const char *)(q + g->si + z), _MM_HINT_T0);
    _mm_prefetch((const char *)(q + g->si + g->sj + z), _MM_HINT_T0);
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

// fanz renders a fan of n rays from src to dst0 + i*dd that all share their
// x and y along the way (dd is along z), by trilinear samples at the same
// fractions a_k = (k + 1/2)*step/lref of every segment. At one a_k every ray
// of the fan lies in the same voxel column pair in x and y: the bilinear
// weights in x and y are computed once per sample for all rays, and the
// rays of a 16-lane vector, which sit on neighbouring z in the same four
// columns, read them with two contiguous loads per column and a permute in
// place of gathers. Needs a padded volume (zero border) of fewer than 2^31
// voxels.
__attribute__((target("avx512f,avx512bw,bmi2"))) static void fanz(const tl_volume *vol, const double *src,
                                                                   const double *dst0, const double *dd, int64_t n,
                                                                   float *out, int64_t ostride, double step,
                                                                   double lref) {
  fan_geo g;
  fan_geometry(vol, src, dst0, dd, step, lref, &g);
  const int32_t nz = g.nz, si = g.si, sj = g.sj;
  const double da = g.da, az = g.az, bz = g.bz, gz = g.gz;
  const int64_t k0 = g.k0, k1 = g.k1;
  const float fzhi = (float)(nz - 1), fazf = (float)az;
  const __m512 zero = _mm512_setzero_ps(), vzhi = _mm512_set1_ps(fzhi), vaz = _mm512_set1_ps(fazf);
  const __m512i one = _mm512_set1_epi32(1), vnz2 = _mm512_set1_epi32(nz - 2);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const float *v = vol->v;
  for (int64_t r0 = 0; r0 < n; r0 += FANCH) {
    const int m = n - r0 < FANCH ? (int)(n - r0) : FANCH, nv = (m + 15) / 16;
    __m512 ci[FANCH / 16], part[FANCH / 16];
    float cfirst[FANCH / 16], clast[FANCH / 16];
    __mmask16 live[FANCH / 16];
    double acc[FANCH];
    for (int j = 0; j < nv; j++) {
      float c[16];
      for (int l = 0; l < 16; l++) c[l] = (float)(bz + (double)(r0 + 16 * j + l) * gz);
      ci[j] = _mm512_loadu_ps(c);
      int last = m - 16 * j < 16 ? m - 16 * j - 1 : 15;
      cfirst[j] = c[0];
      clast[j] = c[last];
      live[j] = (__mmask16)((1u << (last + 1)) - 1);
      part[j] = zero;
    }
    for (int i = 0; i < m; i++) acc[i] = 0;
    // The chunk's rays' z slopes span [cmin, cmax].
    const double ca = bz + (double)r0 * gz, cb = bz + (double)(r0 + m - 1) * gz;
    const double cmin = ca < cb ? ca : cb, cmax = ca < cb ? cb : ca;
    int32_t lastpf = -1;
    const float cminf = cfirst[0] < clast[nv - 1] ? cfirst[0] : clast[nv - 1];
    const float cmaxf = cfirst[0] < clast[nv - 1] ? clast[nv - 1] : cfirst[0];
    float buf[FANBUF];
    for (int64_t k = k0; k <= k1; k++) {
      const double a = (k + 0.5) * da;
      float w[4];
      const int32_t base = fan_cell(&g, a, w);
      const __m512 w00 = _mm512_set1_ps(w[0]), w01 = _mm512_set1_ps(w[1]), w10 = _mm512_set1_ps(w[2]),
                   w11 = _mm512_set1_ps(w[3]);
      const float *p00 = v + base, *p01 = p00 + sj, *p10 = p00 + si, *p11 = p10 + sj;
      if (k + FANPF <= k1) fan_prefetch(v, &g, (k + FANPF + 0.5) * da, cmin, cmax, &lastpf);
      const float af = (float)a;
      const __m512 va = _mm512_set1_ps(af);
      // The chunk's z range at this sample, in the lanes' own float
      // arithmetic (fmaf is monotonic in the slope).
      float zA = fmaf(af, cminf, fazf), zB = fmaf(af, cmaxf, fazf);
      if (zB < 0 || zA > fzhi) goto next; // every ray of the chunk is above or below the volume
      {
        int32_t blo = (int32_t)(zA < 0 ? 0 : zA), bhi = (int32_t)(zB > fzhi ? fzhi : zB);
        if (blo > nz - 2) blo = nz - 2;
        if (bhi > nz - 2) bhi = nz - 2;
        int32_t cnt = bhi + 2 - blo; // z = blo … bhi+1 are read
        if (cnt <= FANBUF - 32) {
          // Blend the four columns once for the whole chunk: buf[z - blo]
          // is the bilinear value in x and y at height z; each ray then
          // needs only its two z neighbours from it.
          int32_t left = nz - blo;
          for (int32_t z = 0; z < cnt; z += 16) {
            __mmask16 mk = left - z >= 16 ? 0xFFFF : (__mmask16)_bzhi_u32(0xFFFF, left - z);
            __m512 b = _mm512_mul_ps(w00, _mm512_maskz_loadu_ps(mk, p00 + blo + z));
            b = _mm512_fmadd_ps(w01, _mm512_maskz_loadu_ps(mk, p01 + blo + z), b);
            b = _mm512_fmadd_ps(w10, _mm512_maskz_loadu_ps(mk, p10 + blo + z), b);
            b = _mm512_fmadd_ps(w11, _mm512_maskz_loadu_ps(mk, p11 + blo + z), b);
            _mm512_storeu_ps(buf + z, b);
          }
          const __m512i vblo = _mm512_set1_epi32(blo);
          for (int j = 0; j < nv; j++) {
            __m512 z = _mm512_fmadd_ps(va, ci[j], vaz);
            __mmask16 in = live[j] & _mm512_cmp_ps_mask(z, zero, _CMP_GE_OQ) & _mm512_cmp_ps_mask(z, vzhi, _CMP_LE_OQ);
            if (!in) continue;
            __m512 zc = _mm512_min_ps(_mm512_max_ps(z, zero), vzhi);
            __m512i iz = _mm512_min_epi32(_mm512_cvttps_epi32(zc), vnz2);
            __m512 fz = _mm512_sub_ps(zc, _mm512_cvtepi32_ps(iz));
            __m512 c0, c1;
            float z0 = fmaf(af, cfirst[j], fazf), z1 = fmaf(af, clast[j], fazf);
            float zmin = z0 < z1 ? z0 : z1, zmax = z0 < z1 ? z1 : z0;
            int32_t wlo = (int32_t)(zmin < 0 ? 0 : zmin), whi = (int32_t)(zmax > fzhi ? fzhi : zmax);
            if (wlo > nz - 2) wlo = nz - 2;
            if (whi > nz - 2) whi = nz - 2;
            if (whi + 1 - wlo <= 31) {
              __m512i rel = _mm512_sub_epi32(iz, _mm512_set1_epi32(wlo));
              __m512 L = _mm512_loadu_ps(buf + (wlo - blo)), H = _mm512_loadu_ps(buf + (wlo - blo) + 16);
              c0 = _mm512_permutex2var_ps(L, rel, H);
              c1 = _mm512_permutex2var_ps(L, _mm512_add_epi32(rel, one), H);
            } else {
              __m512i rel = _mm512_sub_epi32(iz, vblo);
              c0 = _mm512_mask_i32gather_ps(zero, in, rel, buf, 4);
              c1 = _mm512_mask_i32gather_ps(zero, in, _mm512_add_epi32(rel, one), buf, 4);
            }
            __m512 val = _mm512_fmadd_ps(fz, _mm512_sub_ps(c1, c0), c0);
            part[j] = _mm512_mask_add_ps(part[j], in, part[j], val);
          }
          goto next;
        }
      }
      for (int j = 0; j < nv; j++) {
        // The rays' z are monotonic across lanes: the window of z the
        // vector reads runs from its first to its last lane, computed
        // here with the same float operations as the lanes.
        float z0 = fmaf(af, cfirst[j], fazf), z1 = fmaf(af, clast[j], fazf);
        float zmin = z0 < z1 ? z0 : z1, zmax = z0 < z1 ? z1 : z0;
        if (zmax < 0 || zmin > fzhi) continue; // the whole vector is above or below the volume
        __m512 z = _mm512_fmadd_ps(va, ci[j], vaz);
        __mmask16 in = live[j] & _mm512_cmp_ps_mask(z, zero, _CMP_GE_OQ) & _mm512_cmp_ps_mask(z, vzhi, _CMP_LE_OQ);
        __m512 zc = _mm512_min_ps(_mm512_max_ps(z, zero), vzhi);
        __m512i iz = _mm512_min_epi32(_mm512_cvttps_epi32(zc), vnz2);
        __m512 fz = _mm512_sub_ps(zc, _mm512_cvtepi32_ps(iz));
        int32_t izlo = (int32_t)(zmin < 0 ? 0 : zmin), izhi = (int32_t)(zmax > fzhi ? fzhi : zmax); // as iz
        if (izlo > nz - 2) izlo = nz - 2;
        if (izhi > nz - 2) izhi = nz - 2;
        __m512 c0, c1;
        if (izhi + 1 - izlo <= 31) {
          // Two 16-float loads per column cover the window; the loads stop
          // at the column's end (masked), so nothing past the volume is read.
          int32_t left = nz - izlo;
          __mmask16 mlo = left >= 16 ? 0xFFFF : (__mmask16)_bzhi_u32(0xFFFF, left);
          __mmask16 mhi = left >= 32 ? 0xFFFF : (left > 16 ? (__mmask16)_bzhi_u32(0xFFFF, left - 16) : 0);
          __m512 L = _mm512_mul_ps(w00, _mm512_maskz_loadu_ps(mlo, p00 + izlo));
          L = _mm512_fmadd_ps(w01, _mm512_maskz_loadu_ps(mlo, p01 + izlo), L);
          L = _mm512_fmadd_ps(w10, _mm512_maskz_loadu_ps(mlo, p10 + izlo), L);
          L = _mm512_fmadd_ps(w11, _mm512_maskz_loadu_ps(mlo, p11 + izlo), L);
          __m512 H = _mm512_mul_ps(w00, _mm512_maskz_loadu_ps(mhi, p00 + izlo + 16));
          H = _mm512_fmadd_ps(w01, _mm512_maskz_loadu_ps(mhi, p01 + izlo + 16), H);
          H = _mm512_fmadd_ps(w10, _mm512_maskz_loadu_ps(mhi, p10 + izlo + 16), H);
          H = _mm512_fmadd_ps(w11, _mm512_maskz_loadu_ps(mhi, p11 + izlo + 16), H);
          __m512i rel = _mm512_sub_epi32(iz, _mm512_set1_epi32(izlo));
          c0 = _mm512_permutex2var_ps(L, rel, H);
          c1 = _mm512_permutex2var_ps(L, _mm512_add_epi32(rel, one), H);
        } else {
          // Rays further apart in z than a window: gather each voxel with
          // its z neighbour as one 8-byte element, per column.
          __m512i idx = _mm512_maskz_mov_epi32(in, _mm512_add_epi32(iz, _mm512_set1_epi32(base)));
          __m256i ilo = _mm512_castsi512_si256(idx), ihi = _mm512_extracti64x4_epi64(idx, 1);
          __mmask8 mlo = (__mmask8)in, mhi = (__mmask8)(in >> 8);
          c0 = c1 = zero;
          const int32_t offs[4] = {0, sj, si, si + sj};
          const __m512 ws[4] = {w00, w01, w10, w11};
          for (int q = 0; q < 4; q++) {
            __m256i o = _mm256_set1_epi32(offs[q]);
            __m512 ga = _mm512_castpd_ps(_mm512_mask_i32gather_pd(_mm512_setzero_pd(), mlo, _mm256_add_epi32(ilo, o), v, 4));
            __m512 gb = _mm512_castpd_ps(_mm512_mask_i32gather_pd(_mm512_setzero_pd(), mhi, _mm256_add_epi32(ihi, o), v, 4));
            c0 = _mm512_fmadd_ps(ws[q], _mm512_permutex2var_ps(ga, even, gb), c0);
            c1 = _mm512_fmadd_ps(ws[q], _mm512_permutex2var_ps(ga, odd, gb), c1);
          }
        }
        __m512 val = _mm512_fmadd_ps(fz, _mm512_sub_ps(c1, c0), c0);
        part[j] = _mm512_mask_add_ps(part[j], in, part[j], val);
      }
    next:
      if (((k - k0) & 63) == 63) { // flush the float32 partial sums into double
        for (int j = 0; j < nv; j++) {
          float p[16];
          _mm512_storeu_ps(p, part[j]);
          for (int l = 0; l < 16 && 16 * j + l < m; l++) acc[16 * j + l] += p[l];
          part[j] = zero;
        }
      }
    }
    for (int j = 0; j < nv; j++) {
      float p[16];
      _mm512_storeu_ps(p, part[j]);
      for (int l = 0; l < 16 && 16 * j + l < m; l++) acc[16 * j + l] += p[l];
    }
    fan_write(src, dst0, dd, r0, m, acc, da, out, ostride);
  }
}

// fanz8 is fanz for AVX2: 8 rays per vector, the two z neighbours read
// from the blended columns by two 8-float loads and in-register permutes,
// gathers where the rays are more than 15 voxels apart in z or the chunk's
// z range exceeds the blend buffer.
__attribute__((target("avx2,fma"))) static void fanz8(const tl_volume *vol, const double *src, const double *dst0,
                                                      const double *dd, int64_t n, float *out, int64_t ostride,
                                                      double step, double lref) {
  fan_geo g;
  fan_geometry(vol, src, dst0, dd, step, lref, &g);
  const int32_t nz = g.nz, si = g.si, sj = g.sj;
  const float fzhi = (float)(nz - 1), fazf = (float)g.az;
  const __m256 zero = _mm256_setzero_ps(), vzhi = _mm256_set1_ps(fzhi), vaz = _mm256_set1_ps(fazf);
  const __m256i one = _mm256_set1_epi32(1), seven = _mm256_set1_epi32(7), vnz2 = _mm256_set1_epi32(nz - 2);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const float *v = vol->v;
  for (int64_t r0 = 0; r0 < n; r0 += FANCH) {
    const int m = n - r0 < FANCH ? (int)(n - r0) : FANCH, nv = (m + 7) / 8;
    __m256 ci[FANCH / 8], part[FANCH / 8], live[FANCH / 8];
    float cfirst[FANCH / 8], clast[FANCH / 8];
    double acc[FANCH];
    for (int j = 0; j < nv; j++) {
      float c[8];
      for (int l = 0; l < 8; l++) c[l] = (float)(g.bz + (double)(r0 + 8 * j + l) * g.gz);
      ci[j] = _mm256_loadu_ps(c);
      int last = m - 8 * j < 8 ? m - 8 * j - 1 : 7;
      cfirst[j] = c[0];
      clast[j] = c[last];
      live[j] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(last + 1), iota));
      part[j] = zero;
    }
    for (int i = 0; i < m; i++) acc[i] = 0;
    const double ca = g.bz + (double)r0 * g.gz, cb = g.bz + (double)(r0 + m - 1) * g.gz;
    const double cmin = ca < cb ? ca : cb, cmax = ca < cb ? cb : ca;
    const float cminf = cfirst[0] < clast[nv - 1] ? cfirst[0] : clast[nv - 1];
    const float cmaxf = cfirst[0] < clast[nv - 1] ? clast[nv - 1] : cfirst[0];
    int32_t lastpf = -1;
    float buf[FANBUF];
    for (int64_t k = g.k0; k <= g.k1; k++) {
      const double a = (k + 0.5) * g.da;
      float w[4];
      const int32_t base = fan_cell(&g, a, w);
      const __m256 w00 = _mm256_set1_ps(w[0]), w01 = _mm256_set1_ps(w[1]), w10 = _mm256_set1_ps(w[2]),
                   w11 = _mm256_set1_ps(w[3]);
      const float *p00 = v + base, *p01 = p00 + sj, *p10 = p00 + si, *p11 = p10 + sj;
      if (k + FANPF <= g.k1) fan_prefetch(v, &g, (k + FANPF + 0.5) * g.da, cmin, cmax, &lastpf);
      const float af = (float)a;
      const __m256 va = _mm256_set1_ps(af);
      float zA = fmaf(af, cminf, fazf), zB = fmaf(af, cmaxf, fazf);
      if (zB < 0 || zA > fzhi) goto next8; // every ray of the chunk is above or below the volume
      {
        int32_t blo = (int32_t)(zA < 0 ? 0 : zA), bhi = (int32_t)(zB > fzhi ? fzhi : zB);
        if (blo > nz - 2) blo = nz - 2;
        if (bhi > nz - 2) bhi = nz - 2;
        const int32_t cnt = bhi + 2 - blo; // z = blo … bhi+1 are read
        const int blend = cnt <= FANBUF - 16;
        if (blend) {
          int32_t left = nz - blo;
          for (int32_t z = 0; z < cnt; z += 8) {
            __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(left - z), iota);
            __m256 b = _mm256_mul_ps(w00, _mm256_maskload_ps(p00 + blo + z, mk));
            b = _mm256_fmadd_ps(w01, _mm256_maskload_ps(p01 + blo + z, mk), b);
            b = _mm256_fmadd_ps(w10, _mm256_maskload_ps(p10 + blo + z, mk), b);
            b = _mm256_fmadd_ps(w11, _mm256_maskload_ps(p11 + blo + z, mk), b);
            _mm256_storeu_ps(buf + z, b);
          }
        }
        for (int j = 0; j < nv; j++) {
          __m256 z = _mm256_fmadd_ps(va, ci[j], vaz);
          __m256 in = _mm256_and_ps(live[j], _mm256_and_ps(_mm256_cmp_ps(z, zero, _CMP_GE_OQ),
                                                           _mm256_cmp_ps(z, vzhi, _CMP_LE_OQ)));
          if (_mm256_testz_ps(in, in)) continue;
          __m256 zc = _mm256_min_ps(_mm256_max_ps(z, zero), vzhi);
          __m256i iz = _mm256_min_epi32(_mm256_cvttps_epi32(zc), vnz2);
          __m256 fz = _mm256_sub_ps(zc, _mm256_cvtepi32_ps(iz));
          __m256 c0, c1;
          float z0 = fmaf(af, cfirst[j], fazf), z1 = fmaf(af, clast[j], fazf);
          float zmin = z0 < z1 ? z0 : z1, zmax = z0 < z1 ? z1 : z0;
          int32_t wlo = (int32_t)(zmin < 0 ? 0 : zmin), whi = (int32_t)(zmax > fzhi ? fzhi : zmax);
          if (wlo > nz - 2) wlo = nz - 2;
          if (whi > nz - 2) whi = nz - 2;
          if (blend && whi + 1 - wlo <= 15) {
            // Lanes take element rel (and rel+1) of the 16 at wlo: from the
            // low 8 or the high 8, each permuted by the index's low 3 bits.
            __m256i rel = _mm256_sub_epi32(iz, _mm256_set1_epi32(wlo)), rel1 = _mm256_add_epi32(rel, one);
            __m256 L = _mm256_loadu_ps(buf + (wlo - blo)), H = _mm256_loadu_ps(buf + (wlo - blo) + 8);
            c0 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(L, rel), _mm256_permutevar8x32_ps(H, rel),
                                  _mm256_castsi256_ps(_mm256_cmpgt_epi32(rel, seven)));
            c1 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(L, rel1), _mm256_permutevar8x32_ps(H, rel1),
                                  _mm256_castsi256_ps(_mm256_cmpgt_epi32(rel1, seven)));
          } else if (blend) {
            __m256i rel = _mm256_sub_epi32(iz, _mm256_set1_epi32(blo));
            c0 = _mm256_mask_i32gather_ps(zero, buf, rel, in, 4);
            c1 = _mm256_mask_i32gather_ps(zero, buf, _mm256_add_epi32(rel, one), in, 4);
          } else {
            __m256i idx = _mm256_add_epi32(iz, _mm256_set1_epi32(base));
            const int32_t offs[4] = {0, sj, si, si + sj};
            const __m256 ws[4] = {w00, w01, w10, w11};
            c0 = c1 = zero;
            for (int q = 0; q < 4; q++) {
              __m256i o = _mm256_add_epi32(idx, _mm256_set1_epi32(offs[q]));
              c0 = _mm256_fmadd_ps(ws[q], _mm256_mask_i32gather_ps(zero, v, o, in, 4), c0);
              c1 = _mm256_fmadd_ps(ws[q], _mm256_mask_i32gather_ps(zero, v, _mm256_add_epi32(o, one), in, 4), c1);
            }
          }
          __m256 val = _mm256_fmadd_ps(fz, _mm256_sub_ps(c1, c0), c0);
          part[j] = _mm256_add_ps(part[j], _mm256_and_ps(in, val));
        }
      }
    next8:
      if (((k - g.k0) & 63) == 63) { // flush the float32 partial sums into double
        for (int j = 0; j < nv; j++) {
          float p[8];
          _mm256_storeu_ps(p, part[j]);
          for (int l = 0; l < 8 && 8 * j + l < m; l++) acc[8 * j + l] += p[l];
          part[j] = zero;
        }
      }
    }
    for (int j = 0; j < nv; j++) {
      float p[8];
      _mm256_storeu_ps(p, part[j]);
      for (int l = 0; l < 8 && 8 * j + l < m; l++) acc[8 * j + l] += p[l];
    }
    fan_write(src, dst0, dd, r0, m, acc, g.da, out, ostride);
  }
}

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

// fan_siddon is Siddon's path for a fan of n rays from src to dst0 + i*dd
// with dd along z, 8 rays at a time in the lanes of AVX-512 vectors. The
// rays share their x and y at every a, so the crossings with the x and y
// planes are merged once for the fan (seg: a list of the segments between
// them, each in one x-y column of voxels); each ray then walks its own z
// crossings within each segment, mostly none or one.
__attribute__((target("avx512f,avx512dq,avx512vl,bmi2"))) static void fan_siddon(const tl_volume *vol, const double *src,
                                                                     const double *dst0, const double *dd,
                                                                     int64_t n, float *out, int64_t ostride,
                                                                     double *seg, int64_t *cell) {
  const double d2[3] = {dst0[0] - src[0], dst0[1] - src[1], 0};
  double amin, amax;
  const int64_t nseg = fan_segments(vol, src, d2, seg, cell, &amin, &amax);
  const double oz = vol->o[2], sz = vol->s[2], inv = 1 / sz;
  const int64_t nz = vol->n[2];
  const float *v = vol->v;
  const __m512d zero = _mm512_setzero_pd(), inf = _mm512_set1_pd(INFINITY);
  const __m512d zs = _mm512_set1_pd((src[2] - oz) * inv);
  const __m512i one = _mm512_set1_epi64(1), kmax = _mm512_set1_epi64(nz - 1), zeroi = _mm512_setzero_si512();
  const __m512i fifteen = _mm512_set1_epi64(15);
  for (int64_t r0 = 0; r0 < n; r0 += FANCH) {
    // A chunk of up to FANCH rays, 8 per vector; per vector its rays' z
    // steps, their a ranges inside the volume, and their sums.
    const int m = n - r0 < FANCH ? (int)(n - r0) : FANCH, nv = (m + 7) / 8;
    __m512d vlo[FANCH / 8], vhi[FANCH / 8], base[FANCH / 8], inc[FANCH / 8], zd[FANCH / 8], sum[FANCH / 8];
    __m512i kstep[FANCH / 8];
    __mmask8 live[FANCH / 8], up[FANCH / 8], down[FANCH / 8];
    double len[FANCH], dzmin = INFINITY, dzmax = -INFINITY;
    for (int j = 0; j < nv; j++) {
      double dz[8], lo[8], hi[8];
      live[j] = 0;
      for (int l = 0; l < 8; l++) {
        int i = 8 * j + l;
        dz[l] = i < m ? dst0[2] + (double)(r0 + i) * dd[2] - src[2] : 0;
        if (i < m) len[i] = sqrt(d2[0] * d2[0] + d2[1] * d2[1] + dz[l] * dz[l]);
        lo[l] = amin;
        hi[l] = amax;
        if (i >= m || nseg == 0) continue;
        if (fan_lane(vol, src, dz[l], amin, amax, &lo[l], &hi[l])) {
          live[j] |= (__mmask8)(1u << l);
          if (dz[l] < dzmin) dzmin = dz[l];
          if (dz[l] > dzmax) dzmax = dz[l];
        }
      }
      __m512d vdz = _mm512_loadu_pd(dz);
      vlo[j] = _mm512_loadu_pd(lo);
      vhi[j] = _mm512_loadu_pd(hi);
      up[j] = _mm512_cmp_pd_mask(vdz, zero, _CMP_GT_OQ);
      down[j] = _mm512_cmp_pd_mask(vdz, zero, _CMP_LT_OQ);
      // Plane k of z is crossed at a = base + k*inc (as siddon()).
      base[j] = _mm512_div_pd(_mm512_set1_pd(oz - src[2]), vdz);
      inc[j] = _mm512_div_pd(_mm512_set1_pd(sz), vdz);
      zd[j] = _mm512_mul_pd(vdz, _mm512_set1_pd(inv));
      kstep[j] = _mm512_mask_blend_epi64(down[j], one, _mm512_set1_epi64(-1));
      sum[j] = zero;
    }
    for (int64_t s = 0; s < nseg; s++) {
      if (s + FANPF < nseg && dzmin <= dzmax) {
        // Prefetch the z range the chunk reads FANPF segments ahead.
        double a = seg[s + FANPF];
        double za = ((src[2] + a * dzmin) - oz) * inv, zb = ((src[2] + a * dzmax) - oz) * inv;
        int64_t zlo = za < 0 ? 0 : (za > nz - 1 ? nz - 1 : (int64_t)za);
        int64_t zhi = zb < 0 ? 0 : (zb > nz - 1 ? nz - 1 : (int64_t)zb);
        const float *q = v + cell[s + FANPF];
        for (int64_t z = zlo & ~15; z <= zhi; z += 16) _mm_prefetch((const char *)(q + z), _MM_HINT_T0);
      }
      const __m512d s0 = _mm512_set1_pd(seg[s]), s1 = _mm512_set1_pd(seg[s + 1]);
      const __m512i col = _mm512_set1_epi64(cell[s]);
      const float *cp = v + cell[s];
      for (int j = 0; j < nv; j++) {
        __m512d b0 = _mm512_max_pd(s0, vlo[j]), b1 = _mm512_min_pd(s1, vhi[j]);
        __mmask8 on = live[j] & _mm512_cmp_pd_mask(b0, b1, _CMP_LT_OQ);
        if (!on) continue;
        // The z voxel at b0: the one the ray is in just after b0.
        __m512d z = _mm512_fmadd_pd(b0, zd[j], zs);
        __m512d kf = _mm512_mask_sub_pd(_mm512_roundscale_pd(z, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), down[j],
                                        _mm512_roundscale_pd(z, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC),
                                        _mm512_set1_pd(1));
        __m512i k = _mm512_min_epi64(_mm512_max_epi64(_mm512_cvttpd_epi64(kf), zeroi), kmax);
        const __mmask8 upj = up[j], level = ~(up[j] | down[j]);
        const __m512d incj = inc[j], basej = base[j];
        __m512d acc = sum[j];
        for (;;) {
          // The next z plane: k+1 going up, k going down; none if level.
          __m512d plane = _mm512_cvtepi64_pd(_mm512_mask_add_epi64(k, upj, k, one));
          __m512d an = _mm512_mask_blend_pd(level, _mm512_fmadd_pd(plane, incj, basej), inf);
          // Never behind b0: for a ray nearly level on a plane, rounding
          // can put the crossing before it.
          __m512d e = _mm512_max_pd(_mm512_min_pd(an, b1), b0);
          __m512d piece = _mm512_sub_pd(e, b0);
          // The lanes' voxels mostly lie within 16 of the lowest: one load
          // and a permute, else a gather.
          int64_t klo = _mm512_mask_reduce_min_epi64(on, k);
          __m512i rel = _mm512_sub_epi64(k, _mm512_set1_epi64(klo));
          __m256 val;
          if ((_mm512_cmp_epu64_mask(rel, fifteen, _MM_CMPINT_LE) & on) == on) {
            int64_t left = nz - klo;
            __mmask16 mk = left >= 16 ? 0xFFFF : (__mmask16)_bzhi_u32(0xFFFF, (unsigned)left);
            __m512 w = _mm512_maskz_loadu_ps(mk, cp + klo);
            val = _mm512_castps512_ps256(_mm512_permutexvar_ps(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(rel)), w));
          } else {
            val = _mm512_mask_i64gather_ps(_mm256_setzero_ps(), on, _mm512_add_epi64(col, k), v, 4);
          }
          acc = _mm512_mask3_fmadd_pd(piece, _mm512_cvtps_pd(val), acc, on);
          k = _mm512_add_epi64(k, kstep[j]);
          on &= _mm512_cmp_pd_mask(an, b1, _CMP_LT_OQ) & _mm512_cmp_epi64_mask(k, zeroi, _MM_CMPINT_NLT) &
                _mm512_cmp_epi64_mask(k, kmax, _MM_CMPINT_LE);
          if (!on) break;
          b0 = e;
        }
        sum[j] = acc;
      }
    }
    for (int j = 0; j < nv; j++) {
      double acc[8];
      _mm512_storeu_pd(acc, sum[j]);
      for (int l = 0; l < 8 && 8 * j + l < m; l++) out[(r0 + 8 * j + l) * ostride] = (float)(acc[l] * len[8 * j + l]);
    }
  }
}

// fan_siddon4 is fan_siddon for AVX2: 4 rays per vector, voxel indices
// kept as doubles (exact for any volume) and values gathered. Needs a
// volume of fewer than 2^31 voxels.
__attribute__((target("avx2,fma"))) static void fan_siddon4(const tl_volume *vol, const double *src,
                                                            const double *dst0, const double *dd, int64_t n,
                                                            float *out, int64_t ostride, double *seg,
                                                            int64_t *cell) {
  const double d2[3] = {dst0[0] - src[0], dst0[1] - src[1], 0};
  double amin, amax;
  const int64_t nseg = fan_segments(vol, src, d2, seg, cell, &amin, &amax);
  const double oz = vol->o[2], sz = vol->s[2], inv = 1 / sz;
  const float *v = vol->v;
  const __m256d zero = _mm256_setzero_pd(), inf = _mm256_set1_pd(INFINITY), onev = _mm256_set1_pd(1);
  const __m256d zs = _mm256_set1_pd((src[2] - oz) * inv), kmax = _mm256_set1_pd((double)(vol->n[2] - 1));
  for (int64_t r0 = 0; r0 < n; r0 += 4) {
    const int m = n - r0 < 4 ? (int)(n - r0) : 4;
    double dz[4], lo[4], hi[4], len[4], livef[4];
    for (int l = 0; l < 4; l++) {
      dz[l] = l < m ? dst0[2] + (double)(r0 + l) * dd[2] - src[2] : 0;
      len[l] = sqrt(d2[0] * d2[0] + d2[1] * d2[1] + dz[l] * dz[l]);
      livef[l] = l < m && nseg > 0 && fan_lane(vol, src, dz[l], amin, amax, &lo[l], &hi[l]) ? -1.0 : 0.0;
      if (livef[l] == 0) lo[l] = hi[l] = 0;
    }
    double acc[4] = {0};
    const __m256d live = _mm256_cmp_pd(_mm256_loadu_pd(livef), zero, _CMP_NEQ_OQ);
    if (!_mm256_testz_pd(live, live)) {
      const __m256d vdz = _mm256_loadu_pd(dz), vlo = _mm256_loadu_pd(lo), vhi = _mm256_loadu_pd(hi);
      const __m256d up = _mm256_cmp_pd(vdz, zero, _CMP_GT_OQ), down = _mm256_cmp_pd(vdz, zero, _CMP_LT_OQ);
      const __m256d level = _mm256_cmp_pd(vdz, zero, _CMP_EQ_OQ);
      const __m256d base = _mm256_div_pd(_mm256_set1_pd(oz - src[2]), vdz), inc = _mm256_div_pd(_mm256_set1_pd(sz), vdz);
      const __m256d zd = _mm256_mul_pd(vdz, _mm256_set1_pd(inv));
      const __m256d kstep = _mm256_blendv_pd(onev, _mm256_set1_pd(-1), down);
      __m256d sum = zero;
      for (int64_t s = 0; s < nseg; s++) {
        __m256d b0 = _mm256_max_pd(_mm256_set1_pd(seg[s]), vlo), b1 = _mm256_min_pd(_mm256_set1_pd(seg[s + 1]), vhi);
        __m256d on = _mm256_and_pd(live, _mm256_cmp_pd(b0, b1, _CMP_LT_OQ));
        if (_mm256_testz_pd(on, on)) continue;
        // The z voxel at b0: the one the ray is in just after b0.
        __m256d z = _mm256_fmadd_pd(b0, zd, zs);
        __m256d k = _mm256_blendv_pd(_mm256_round_pd(z, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                                     _mm256_sub_pd(_mm256_round_pd(z, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC), onev),
                                     down);
        k = _mm256_min_pd(_mm256_max_pd(k, zero), kmax);
        const float *col = v + cell[s];
        for (;;) {
          __m256d plane = _mm256_blendv_pd(k, _mm256_add_pd(k, onev), up);
          __m256d an = _mm256_blendv_pd(_mm256_fmadd_pd(plane, inc, base), inf, level);
          __m256d e = _mm256_max_pd(_mm256_min_pd(an, b1), b0);
          __m256d piece = _mm256_and_pd(on, _mm256_sub_pd(e, b0));
          __m128 val = _mm_mask_i32gather_ps(_mm_setzero_ps(), col, _mm256_cvttpd_epi32(_mm256_and_pd(on, k)),
                                             _mm256_cvtpd_ps(on), 4);
          sum = _mm256_fmadd_pd(piece, _mm256_cvtps_pd(val), sum);
          k = _mm256_add_pd(k, kstep);
          on = _mm256_and_pd(on, _mm256_and_pd(_mm256_cmp_pd(an, b1, _CMP_LT_OQ),
                                               _mm256_and_pd(_mm256_cmp_pd(k, zero, _CMP_GE_OQ),
                                                             _mm256_cmp_pd(k, kmax, _CMP_LE_OQ))));
          if (_mm256_testz_pd(on, on)) break;
          b0 = e;
        }
      }
      _mm256_storeu_pd(acc, sum);
    }
    for (int l = 0; l < m; l++) out[(r0 + l) * ostride] = (float)(acc[l] * len[l]);
  }
}

// fan renders one fan; seg and cell are scratch for Siddon's x-y segments,
// n[0] + n[1] + 4 entries (seg one more), or NULL.
static void fan(const tl_volume *vol, int padded, const tl_fan *f, float *out, double step, double *seg,
                int64_t *cell) {
  const int isa = tl_cpu_isa();
  const int along = f->dd[0] == 0 && f->dd[1] == 0, small = vol->n[0] * vol->n[1] * vol->n[2] < ((int64_t)1 << 31) - 1;
  if (step > 0 && f->lref > 0 && padded && along && vol->n[2] >= 2 && small && isa >= 1) {
    if (isa == 2)
      fanz(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, step, f->lref);
    else
      fanz8(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, step, f->lref);
    return;
  }
  if (step <= 0 && along && seg && (isa == 2 || (isa == 1 && small))) {
    if (isa == 2)
      fan_siddon(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, seg, cell);
    else
      fan_siddon4(vol, f->src, f->dst0, f->dd, f->n, out, f->stride, seg, cell);
    return;
  }
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
  // plane. Without it (out of memory) the fans go ray by ray.
  double *seg = NULL;
  int64_t *cell = NULL;
  if (step <= 0) {
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
