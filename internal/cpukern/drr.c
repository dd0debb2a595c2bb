// Digitally reconstructed radiographs: line integrals of a voxel volume.
//
// siddon() is the exact radiological path of Siddon (1985) in the
// incremental form of Jacobs et al. (1998): the parametric crossings of the
// ray with the x, y and z voxel planes are merged in order, and each
// segment between consecutive crossings adds its length times the value of
// its voxel, whose index steps by one along the axis that crossed. A ray
// lying in a plane belongs to the voxels on the plane's positive side, as
// the half-open voxel spans say.
#include "drr.h"
#include "drr_internal.h"
#include "isa.h"
#include "pairdist.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static inline int64_t clampi(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : (x > hi ? hi : x); }

// tl_clip intersects the segment p(a) = src + a*d, a in [0, 1], with the
// volume's box (its first axes axes only); it returns 0 when the ray
// misses it.
int tl_clip(const tl_volume *vol, const double *src, const double *d, int axes, double *amin, double *amax) {
  double lo = 0, hi = 1;
  for (int ax = 0; ax < axes; ax++) {
    double b0 = vol->o[ax], b1 = vol->o[ax] + vol->n[ax] * vol->s[ax];
    if (d[ax] == 0) {
      if (src[ax] < b0 || src[ax] >= b1) return 0;
      continue;
    }
    double a0 = (b0 - src[ax]) / d[ax], a1 = (b1 - src[ax]) / d[ax];
    if (a0 > a1) { double t = a0; a0 = a1; a1 = t; }
    if (a0 > lo) lo = a0;
    if (a1 < hi) hi = a1;
  }
  *amin = lo;
  *amax = hi;
  return lo < hi;
}

// tl_axis_start prepares the walk along axis ax of the ray src + a*d entering
// the volume at a = amin: the first plane crossing after amin (next, with
// the distance between crossings inc) and the voxel index before it.
// Deriving the index from the plane keeps the two consistent when the ray
// starts on a plane, at an edge or at a corner.
void tl_axis_start(const tl_volume *vol, int ax, const double *src, const double *d, double amin, double *next,
                   double *inc, int64_t *idx) {
  double inv = 1 / vol->s[ax];
  if (d[ax] == 0) {
    *next = INFINITY;
    *inc = 0;
    // Constant along the ray: on a plane, the voxel on its positive side.
    *idx = clampi((int64_t)floor((src[ax] - vol->o[ax]) * inv), 0, vol->n[ax] - 1);
    return;
  }
  double base = (vol->o[ax] - src[ax]) / d[ax];
  double step = vol->s[ax] / d[ax]; // signed: a of plane k is base + k*step
  double p = (src[ax] + amin * d[ax] - vol->o[ax]) * inv;
  double k = d[ax] > 0 ? floor(p) + 1 : ceil(p) - 1;
  // The plane the ray enters through is behind it, however rounding
  // placed it: the first crossing is an interior plane or the exit.
  if (d[ax] > 0 && k < 1) k = 1;
  if (d[ax] < 0 && k > vol->n[ax] - 1) k = vol->n[ax] - 1;
  double a = base + k * step;
  while (a <= amin) { // rounding: make the first crossing strictly later
    k += d[ax] > 0 ? 1 : -1;
    a = base + k * step;
  }
  *next = a;
  *inc = fabs(step);
  *idx = clampi((int64_t)(d[ax] > 0 ? k - 1 : k), 0, vol->n[ax] - 1);
}

static double siddon(const tl_volume *vol, const double *src, const double *dst) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double amin, amax;
  if (!tl_clip(vol, src, d, 3, &amin, &amax)) return 0;
  // Per axis: the next crossing a = base + k*inc of plane k after amin,
  // and the voxel index before it.
  double next[3], inc[3];
  int64_t idx[3];
  for (int ax = 0; ax < 3; ax++) tl_axis_start(vol, ax, src, d, amin, &next[ax], &inc[ax], &idx[ax]);
  const int64_t ny = vol->n[1], nz = vol->n[2];
  // Step the index of whichever axis crosses next (all of them on a tie,
  // at an edge or a corner): each segment costs a comparison and a load.
  const int64_t stride[3] = {ny * nz, nz, 1};
  int64_t step[3], off = (idx[0] * ny + idx[1]) * nz + idx[2];
  int64_t left[3]; // crossings left before the ray leaves the volume on that axis
  for (int ax = 0; ax < 3; ax++) {
    step[ax] = d[ax] > 0 ? stride[ax] : -stride[ax];
    left[ax] = d[ax] > 0 ? vol->n[ax] - 1 - idx[ax] : idx[ax];
  }
  double acc = 0, a = amin;
  for (;;) {
    int ax = 0;
    if (next[1] < next[ax]) ax = 1;
    if (next[2] < next[ax]) ax = 2;
    double b = next[ax] < amax ? next[ax] : amax;
    acc += (b - a) * vol->v[off];
    if (b >= amax) break;
    a = b;
    // Advance every axis crossing at b.
    for (int q = 0; q < 3; q++) {
      if (next[q] <= b) {
        if (left[q] == 0) return acc * sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        left[q]--;
        off += step[q];
        next[q] += inc[q];
      }
    }
  }
  return acc * sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
}

// sample_index is the trilinear interpolation at continuous index (u, v, w)
// (voxel centres at integers), zero outside the volume: the slow path for
// samples within a voxel of the boundary.
static double sample_index(const tl_volume *vol, double u, double v, double w) {
  const int64_t nx = vol->n[0], ny = vol->n[1], nz = vol->n[2];
  double fu = floor(u), fv = floor(v), fw = floor(w);
  int64_t i = (int64_t)fu, j = (int64_t)fv, k = (int64_t)fw;
  double tu = u - fu, tv = v - fv, tw = w - fw;
  double s = 0;
  for (int di = 0; di < 2; di++)
    for (int dj = 0; dj < 2; dj++)
      for (int dk = 0; dk < 2; dk++) {
        int64_t ii = i + di, jj = j + dj, kk = k + dk;
        if (ii < 0 || jj < 0 || kk < 0 || ii >= nx || jj >= ny || kk >= nz) continue;
        double wgt = (di ? tu : 1 - tu) * (dj ? tv : 1 - tv) * (dk ? tw : 1 - tw);
        s += wgt * vol->v[(ii * ny + jj) * nz + kk];
      }
  return s;
}

// A ray prepared for trilinear sampling: samples q0 … q1 (global sample
// numbers, at fractions (q + 1/2)*step/lref of the segment from the source),
// the first at continuous index u, the next du further, each weighing w mm.
typedef struct {
  double u[3], du[3];
  double w;
  int64_t q0, q1;
} tl_ray;

// prepare clips a ray for sampling. A padded volume has a border of zero
// voxels around the data: its box shrunk by half a voxel is the data's box
// grown by half a voxel, outside which every sample is zero.
// With lref ≤ 0 the ray's own length stands for lref: samples every step mm.
static int prepare(const tl_volume *vol, int padded, const double *src, const double *dst, double step, double lref,
                   tl_ray *r) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (len == 0) return 0;
  double da = step / (lref > 0 ? lref : len); // sample spacing as a fraction of the segment
  tl_volume grown = *vol;
  for (int ax = 0; ax < 3; ax++) {
    double half = padded ? 0.5 : -0.5;
    grown.o[ax] += half * vol->s[ax];
    grown.n[ax] -= padded ? 1 : -1;
  }
  double amin, amax;
  if (!tl_clip(&grown, src, d, 3, &amin, &amax)) return 0;
  double q0 = ceil(amin / da - 0.5), q1 = floor(amax / da - 0.5);
  if (q1 < q0) return 0;
  r->q0 = (int64_t)q0;
  r->q1 = (int64_t)q1;
  r->w = da * len;
  for (int ax = 0; ax < 3; ax++) {
    double a0 = (q0 + 0.5) * da;
    r->u[ax] = (src[ax] + a0 * d[ax] - vol->o[ax]) / vol->s[ax] - 0.5;
    r->du[ax] = da * d[ax] / vol->s[ax];
  }
  return 1;
}

// trilinear sums the samples of one ray. Inside the volume the position
// advances in float32 (its rounding, ~1e-5 of a voxel over a ray, is far
// below the interpolation's own error) and the eight neighbours are read
// with one bounds test; near the boundary sample_index takes over.
static double trilinear(const tl_volume *vol, int padded, const double *src, const double *dst, double step,
                        double lref) {
  tl_ray r;
  if (!prepare(vol, padded, src, dst, step, lref, &r)) return 0;
  const int64_t ny = vol->n[1], nz = vol->n[2];
  const int64_t si = ny * nz, sj = nz;
  const float lx = (float)(vol->n[0] - 1), ly = (float)(vol->n[1] - 1), lz = (float)(vol->n[2] - 1);
  const float *v = vol->v;
  int64_t count = r.q1 - r.q0 + 1;
  double acc = 0;
  float part = 0; // summed in float32 over runs of 64 samples, then added in double
  for (int64_t q = 0; q < count; q++) {
    float x = (float)(r.u[0] + q * r.du[0]), y = (float)(r.u[1] + q * r.du[1]), z = (float)(r.u[2] + q * r.du[2]);
    if (x >= 0 && y >= 0 && z >= 0 && x < lx && y < ly && z < lz) {
      int64_t i = (int64_t)x, j = (int64_t)y, k = (int64_t)z;
      float tu = x - (float)i, tv = y - (float)j, tw = z - (float)k;
      const float *c = v + i * si + j * sj + k;
      float c00 = c[0] + tw * (c[1] - c[0]);
      float c01 = c[sj] + tw * (c[sj + 1] - c[sj]);
      float c10 = c[si] + tw * (c[si + 1] - c[si]);
      float c11 = c[si + sj] + tw * (c[si + sj + 1] - c[si + sj]);
      float c0 = c00 + tv * (c01 - c00), c1 = c10 + tv * (c11 - c10);
      part += c0 + tu * (c1 - c0);
    } else {
      part += (float)sample_index(vol, r.u[0] + q * r.du[0], r.u[1] + q * r.du[1], r.u[2] + q * r.du[2]);
    }
    if ((q & 63) == 63) {
      acc += part;
      part = 0;
    }
  }
  return (acc + part) * r.w;
}

#if TL_X86
// trilinear16 samples up to 16 rays together in the lanes of AVX-512
// vectors: sample q of every ray at once, the eight neighbours fetched with
// gathers. Rays from neighbouring pixels sample neighbouring voxels, so the
// gathers mostly hit the same cache lines. Lanes whose sample lies within a
// voxel of the boundary take the scalar path. Needs voxel offsets that fit
// in int32.
__attribute__((target("avx512f"))) static void trilinear16(const tl_volume *vol, int padded, int nr,
                                                            const double *src, const double *dst, float *out,
                                                            double step, double lref) {
  tl_ray ray[16];
  float bx[16], by[16], bz[16], dx[16], dy[16], dz[16];
  int32_t q0[16], q1[16];
  int64_t qlo = INT64_MAX, qhi = INT64_MIN;
  for (int l = 0; l < 16; l++) {
    int live = l < nr && prepare(vol, padded, src + 3 * l, dst + 3 * l, step, lref, &ray[l]);
    if (!live) { // an empty lane: no samples
      q0[l] = 1;
      q1[l] = 0;
      bx[l] = by[l] = bz[l] = dx[l] = dy[l] = dz[l] = 0;
      continue;
    }
    // Position at global sample q: u + (q − q0)·du, as base + q·du with q
    // counted from the group's first sample (set below).
    q0[l] = 0;
    q1[l] = (int32_t)(ray[l].q1 - ray[l].q0);
    if (ray[l].q0 < qlo) qlo = ray[l].q0;
    if (ray[l].q1 > qhi) qhi = ray[l].q1;
  }
  if (qlo > qhi) {
    for (int l = 0; l < nr; l++) out[l] = 0;
    return;
  }
  for (int l = 0; l < 16; l++) {
    if (q1[l] < q0[l]) continue;
    int64_t shift = ray[l].q0 - qlo; // this ray's first sample, in group counting
    q0[l] = (int32_t)shift;
    q1[l] = (int32_t)(ray[l].q1 - qlo);
    bx[l] = (float)(ray[l].u[0] - shift * ray[l].du[0]);
    by[l] = (float)(ray[l].u[1] - shift * ray[l].du[1]);
    bz[l] = (float)(ray[l].u[2] - shift * ray[l].du[2]);
    dx[l] = (float)ray[l].du[0];
    dy[l] = (float)ray[l].du[1];
    dz[l] = (float)ray[l].du[2];
  }
  const int32_t ny = (int32_t)vol->n[1], nz = (int32_t)vol->n[2];
  const int32_t si = ny * nz, sj = nz;
  const __m512 vbx = _mm512_loadu_ps(bx), vby = _mm512_loadu_ps(by), vbz = _mm512_loadu_ps(bz);
  const __m512 vdx = _mm512_loadu_ps(dx), vdy = _mm512_loadu_ps(dy), vdz = _mm512_loadu_ps(dz);
  const __m512i vq0 = _mm512_loadu_si512(q0), vq1 = _mm512_loadu_si512(q1);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 lx = _mm512_set1_ps((float)(vol->n[0] - 1)), ly = _mm512_set1_ps((float)(vol->n[1] - 1)),
               lz = _mm512_set1_ps((float)(vol->n[2] - 1));
  const __m512i vsi = _mm512_set1_epi32(si), vsj = _mm512_set1_epi32(sj);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const float *v = vol->v;
  const int64_t total = vol->n[0] * vol->n[1] * vol->n[2];
  enum { PF = 16 };
  __m512 part = zero;
  double acc[16] = {0};
  int64_t n = qhi - qlo + 1;
  for (int64_t q = 0; q < n; q++) {
    __m512 qf = _mm512_set1_ps((float)q);
    __m512i qi = _mm512_set1_epi32((int32_t)q);
    __m512 x = _mm512_fmadd_ps(qf, vdx, vbx), y = _mm512_fmadd_ps(qf, vdy, vby), z = _mm512_fmadd_ps(qf, vdz, vbz);
    __mmask16 on = _mm512_cmp_epi32_mask(qi, vq0, _MM_CMPINT_NLT) & _mm512_cmp_epi32_mask(qi, vq1, _MM_CMPINT_LE);
    __mmask16 in = on & _mm512_cmp_ps_mask(x, zero, _CMP_GE_OQ) & _mm512_cmp_ps_mask(y, zero, _CMP_GE_OQ) &
                   _mm512_cmp_ps_mask(z, zero, _CMP_GE_OQ) & _mm512_cmp_ps_mask(x, lx, _CMP_LT_OQ) &
                   _mm512_cmp_ps_mask(y, ly, _CMP_LT_OQ) & _mm512_cmp_ps_mask(z, lz, _CMP_LT_OQ);
    {
      // Prefetch the voxels PF samples ahead for four of the lanes (the
      // group spans a short segment between its first and last): a ray's
      // loads come from L3 and memory, and gathers hide latency poorly.
      __m512 pq = _mm512_set1_ps((float)(q + PF));
      __m512 px = _mm512_fmadd_ps(pq, vdx, vbx), py = _mm512_fmadd_ps(pq, vdy, vby), pz = _mm512_fmadd_ps(pq, vdz, vbz);
      __m512i pi = _mm512_cvttps_epi32(_mm512_max_ps(px, zero)), pj = _mm512_cvttps_epi32(_mm512_max_ps(py, zero)),
              pk = _mm512_cvttps_epi32(_mm512_max_ps(pz, zero));
      __m512i pidx = _mm512_add_epi32(_mm512_add_epi32(_mm512_mullo_epi32(pi, vsi), _mm512_mullo_epi32(pj, vsj)), pk);
      int32_t pl[16];
      _mm512_storeu_si512(pl, pidx);
      for (int l = 0; l < 16; l += 5) {
        int64_t o = pl[l];
        if (o >= 0 && o + si + sj + 1 < total) {
          TL_PREFETCH(v + o);
          TL_PREFETCH(v + o + sj);
          TL_PREFETCH(v + o + si);
          TL_PREFETCH(v + o + si + sj);
        }
      }
    }
    if (in) {
      __m512i i = _mm512_cvttps_epi32(x), j = _mm512_cvttps_epi32(y), k = _mm512_cvttps_epi32(z);
      __m512 tu = _mm512_sub_ps(x, _mm512_cvtepi32_ps(i)), tv = _mm512_sub_ps(y, _mm512_cvtepi32_ps(j)),
             tw = _mm512_sub_ps(z, _mm512_cvtepi32_ps(k));
      __m512i idx = _mm512_add_epi32(_mm512_add_epi32(_mm512_mullo_epi32(i, vsi), _mm512_mullo_epi32(j, vsj)), k);
      idx = _mm512_maskz_mov_epi32(in, idx);
      // Each voxel and its neighbour along z are adjacent in memory: fetch
      // the pair as one 8-byte element (half the loads of two float
      // gathers), then split the pairs into two float vectors.
      __m256i lo = _mm512_castsi512_si256(idx), hi = _mm512_extracti64x4_epi64(idx, 1);
      __mmask8 mlo = (__mmask8)in, mhi = (__mmask8)(in >> 8);
#define PAIR(off, c0, c1)                                                                            \
  do {                                                                                               \
    __m256i o = _mm256_set1_epi32(off);                                                              \
    __m512 a = _mm512_castpd_ps(_mm512_mask_i32gather_pd(_mm512_setzero_pd(), mlo, _mm256_add_epi32(lo, o), v, 4)); \
    __m512 b = _mm512_castpd_ps(_mm512_mask_i32gather_pd(_mm512_setzero_pd(), mhi, _mm256_add_epi32(hi, o), v, 4)); \
    c0 = _mm512_permutex2var_ps(a, even, b);                                                         \
    c1 = _mm512_permutex2var_ps(a, odd, b);                                                          \
  } while (0)
      __m512 c000, c001, c010, c011, c100, c101, c110, c111;
      PAIR(0, c000, c001);
      PAIR(sj, c010, c011);
      PAIR(si, c100, c101);
      PAIR(si + sj, c110, c111);
#undef PAIR
      __m512 c00 = _mm512_fmadd_ps(tw, _mm512_sub_ps(c001, c000), c000);
      __m512 c01 = _mm512_fmadd_ps(tw, _mm512_sub_ps(c011, c010), c010);
      __m512 c10 = _mm512_fmadd_ps(tw, _mm512_sub_ps(c101, c100), c100);
      __m512 c11 = _mm512_fmadd_ps(tw, _mm512_sub_ps(c111, c110), c110);
      __m512 c0 = _mm512_fmadd_ps(tv, _mm512_sub_ps(c01, c00), c00);
      __m512 c1 = _mm512_fmadd_ps(tv, _mm512_sub_ps(c11, c10), c10);
      part = _mm512_mask_add_ps(part, in, part, _mm512_fmadd_ps(tu, _mm512_sub_ps(c1, c0), c0));
    }
    __mmask16 edge = on & ~in;
    if (edge) { // near the boundary: the scalar path, in double
      for (int l = 0; l < 16; l++)
        if (edge >> l & 1) {
          double t = (double)(q - q0[l]);
          acc[l] += sample_index(vol, ray[l].u[0] + t * ray[l].du[0], ray[l].u[1] + t * ray[l].du[1],
                                 ray[l].u[2] + t * ray[l].du[2]);
        }
    }
    if ((q & 63) == 63) { // flush the float32 partial sums into double
      float p[16];
      _mm512_storeu_ps(p, part);
      for (int l = 0; l < 16; l++) acc[l] += p[l];
      part = zero;
    }
  }
  float p[16];
  _mm512_storeu_ps(p, part);
  for (int l = 0; l < nr; l++) out[l] = q1[l] < q0[l] ? 0 : (float)((acc[l] + p[l]) * ray[l].w);
}

static int trilinear16_ok(const tl_volume *vol) {
  return tl_cpu_isa() == TL_ISA_AVX512 && vol->n[0] * vol->n[1] * vol->n[2] < ((int64_t)1 << 31) - 1;
}
#else // x86-64 only: elsewhere every ray goes through trilinear()
static void trilinear16(const tl_volume *vol, int padded, int nr, const double *src, const double *dst, float *out,
                        double step, double lref) {}
static int trilinear16_ok(const tl_volume *vol) { return 0; }
#endif

void tl_rays(const tl_volume *vol, int padded, int64_t nrays, const double *src, const double *dst, float *out,
             int64_t ostride, double step, double lref) {
  if (step > 0 && trilinear16_ok(vol)) {
    for (int64_t r = 0; r < nrays; r += 16) {
      int nr = nrays - r < 16 ? (int)(nrays - r) : 16;
      float o[16];
      trilinear16(vol, padded, nr, src + 3 * r, dst + 3 * r, o, step, lref);
      for (int l = 0; l < nr; l++) out[(r + l) * ostride] = o[l];
    }
    return;
  }
  for (int64_t r = 0; r < nrays; r++)
    out[r * ostride] = (float)(step > 0 ? trilinear(vol, padded, src + 3 * r, dst + 3 * r, step, lref)
                                        : siddon(vol, src + 3 * r, dst + 3 * r));
}

void tl_drr(const float *v, const int64_t *n, const double *o, const double *s, int padded, int64_t nrays, const double *src,
            const double *dst, float *out, double step, double lref) {
  tl_volume vol = {v, {n[0], n[1], n[2]}, {o[0], o[1], o[2]}, {s[0], s[1], s[2]}};
  tl_rays(&vol, padded, nrays, src, dst, out, 1, step, lref);
}
