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
#include <math.h>
#include <stdint.h>

static inline int64_t clampi(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : (x > hi ? hi : x); }

// clip intersects the segment p(a) = src + a*d, a in [0, 1], with the
// volume's box; it returns 0 when the ray misses it.
static int clip(const tl_volume *vol, const double *src, const double *d, double *amin, double *amax) {
  double lo = 0, hi = 1;
  for (int ax = 0; ax < 3; ax++) {
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

static double siddon(const tl_volume *vol, const double *src, const double *dst) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double amin, amax;
  if (!clip(vol, src, d, &amin, &amax)) return 0;
  // Per axis: the next crossing a = base + k*inc of plane k after amin,
  // and the voxel index before it: k-1 going up, k going down. Deriving
  // the index from the plane keeps the two consistent when the ray starts
  // on a plane, at an edge or at a corner.
  double next[3], inc[3], inv[3];
  int64_t idx[3];
  for (int ax = 0; ax < 3; ax++) {
    inv[ax] = 1 / vol->s[ax];
    if (d[ax] == 0) {
      next[ax] = INFINITY;
      inc[ax] = 0;
      // Constant along the ray: on a plane, the voxel on its positive side.
      idx[ax] = clampi((int64_t)floor((src[ax] - vol->o[ax]) * inv[ax]), 0, vol->n[ax] - 1);
      continue;
    }
    double base = (vol->o[ax] - src[ax]) / d[ax];
    inc[ax] = vol->s[ax] / d[ax]; // signed: a of plane k is base + k*inc
    double p = (src[ax] + amin * d[ax] - vol->o[ax]) * inv[ax];
    double k = d[ax] > 0 ? floor(p) + 1 : ceil(p) - 1;
    double a = base + k * inc[ax];
    // The plane the ray enters through is behind it, however rounding
    // placed it: the first crossing is an interior plane or the exit.
    if (d[ax] > 0 && k < 1) k = 1;
    if (d[ax] < 0 && k > vol->n[ax] - 1) k = vol->n[ax] - 1;
    a = base + k * inc[ax];
    while (a <= amin) { // rounding: make the first crossing strictly later
      k += d[ax] > 0 ? 1 : -1;
      a = base + k * inc[ax];
    }
    next[ax] = a;
    inc[ax] = fabs(inc[ax]);
    idx[ax] = clampi((int64_t)(d[ax] > 0 ? k - 1 : k), 0, vol->n[ax] - 1);
  }
  const int64_t nx = vol->n[0], ny = vol->n[1], nz = vol->n[2];
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
  (void)nx;
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
// numbers, at distances (q + 1/2)*step from the source), the first at
// continuous index u, the next du further.
typedef struct {
  double u[3], du[3];
  int64_t q0, q1;
} tl_ray;

static int prepare(const tl_volume *vol, const double *src, const double *dst, double step, tl_ray *r) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (len == 0) return 0;
  // Samples are nonzero only within half a voxel of the box: clip to the
  // box grown by half a voxel on every side.
  tl_volume grown = *vol;
  for (int ax = 0; ax < 3; ax++) {
    grown.o[ax] -= 0.5 * vol->s[ax];
    grown.n[ax] += 1;
  }
  double amin, amax;
  if (!clip(&grown, src, d, &amin, &amax)) return 0;
  double q0 = ceil(amin * len / step - 0.5), q1 = floor(amax * len / step - 0.5);
  if (q1 < q0) return 0;
  r->q0 = (int64_t)q0;
  r->q1 = (int64_t)q1;
  for (int ax = 0; ax < 3; ax++) {
    double a0 = (q0 + 0.5) * step / len;
    r->u[ax] = (src[ax] + a0 * d[ax] - vol->o[ax]) / vol->s[ax] - 0.5;
    r->du[ax] = step / len * d[ax] / vol->s[ax];
  }
  return 1;
}

// trilinear sums the samples of one ray. Inside the volume the position
// advances in float32 (its rounding, ~1e-5 of a voxel over a ray, is far
// below the interpolation's own error) and the eight neighbours are read
// with one bounds test; near the boundary sample_index takes over.
static double trilinear(const tl_volume *vol, const double *src, const double *dst, double step) {
  tl_ray r;
  if (!prepare(vol, src, dst, step, &r)) return 0;
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
  return (acc + part) * step;
}

void tl_drr(const float *v, const int64_t *n, const double *os, int64_t nrays, const double *src,
            const double *dst, float *out, double step) {
  tl_volume vv = {v, {n[0], n[1], n[2]}, {os[0], os[1], os[2]}, {os[3], os[4], os[5]}};
  const tl_volume *vol = &vv;
  for (int64_t r = 0; r < nrays; r++)
    out[r] = (float)(step > 0 ? trilinear(vol, src + 3 * r, dst + 3 * r, step)
                              : siddon(vol, src + 3 * r, dst + 3 * r));
}
