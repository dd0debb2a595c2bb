// Line integrals of a voxel volume in double with their derivatives with
// respect to each ray's end points, and the adjoint with respect to the
// volume, one thread per ray: the twins of internal/cpukern/drrgrad.c
// (its comment gives the formulas), with the same arithmetic.
//
// The volume: v, of shape (nx, ny, nz) in C order, its box's low corner
// (ox, oy, oz) (the centre of voxel 0 less half a voxel) and spacing
// (sx, sy, sz); padded says it carries a border of zero voxels
// (volume.Pad). Ray r runs from src[3r:] to dst[3r:]; step ≤ 0 selects
// Siddon's path, else trilinear samples at the fractions (k + ½)·step/lref
// (lref ≤ 0: the ray's own length), each weighing step·len/lref mm.
// Scalar parameters are 8 bytes wide: gorgonia.org/cu passes 8 bytes per
// kernel argument.

// The helpers' namespace keeps them apart from drr.cu's: the emulator
// compiles every kernel file into one program.
namespace drrgrad {

struct vol {
  const float *v;
  long n[3];
  double o[3], s[3];
};

__device__ static long clampl(long x, long lo, long hi) { return x < lo ? lo : (x > hi ? hi : x); }

// clip intersects the segment src + a·d, a in [0, 1], with the box, and
// names the axes of the entry and exit planes (−1: the segment's end).
__device__ static int clip(const vol &V, const double *src, const double *d, double *amin, double *amax, int *ain,
                           int *aout) {
  double lo = 0, hi = 1;
  int li = -1, hi_ax = -1;
  for (int ax = 0; ax < 3; ax++) {
    double b0 = V.o[ax], b1 = V.o[ax] + V.n[ax] * V.s[ax];
    if (d[ax] == 0) {
      if (src[ax] < b0 || src[ax] >= b1) return 0;
      continue;
    }
    double a0 = (b0 - src[ax]) / d[ax], a1 = (b1 - src[ax]) / d[ax];
    if (a0 > a1) {
      double t = a0;
      a0 = a1;
      a1 = t;
    }
    if (a0 > lo) {
      lo = a0;
      li = ax;
    }
    if (a1 < hi) {
      hi = a1;
      hi_ax = ax;
    }
  }
  *amin = lo;
  *amax = hi;
  *ain = li;
  *aout = hi_ax;
  return lo < hi;
}

// siddon walks the ray (drr.cu's siddon) and returns its line integral;
// with gs it sets the derivatives, with grad it adds g times the
// derivatives with respect to the voxels' values (atomically).
__device__ static double siddon(const vol &V, const double *src, const double *dst, double *gs, double *gd, double g,
                                double *grad) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double amin, amax;
  int ain, aout;
  if (gs) gs[0] = gs[1] = gs[2] = gd[0] = gd[1] = gd[2] = 0;
  if (!clip(V, src, d, &amin, &amax, &ain, &aout)) return 0;
  double next[3], inc[3];
  long idx[3];
  for (int ax = 0; ax < 3; ax++) {
    double inv = 1 / V.s[ax];
    if (d[ax] == 0) {
      next[ax] = INFINITY;
      inc[ax] = 0;
      idx[ax] = clampl((long)floor((src[ax] - V.o[ax]) * inv), 0, V.n[ax] - 1);
      continue;
    }
    double base = (V.o[ax] - src[ax]) / d[ax];
    double st = V.s[ax] / d[ax];
    double p = (src[ax] + amin * d[ax] - V.o[ax]) * inv;
    double k = d[ax] > 0 ? floor(p) + 1 : ceil(p) - 1;
    if (d[ax] > 0 && k < 1) k = 1;
    if (d[ax] < 0 && k > V.n[ax] - 1) k = V.n[ax] - 1;
    double a = base + k * st;
    while (a <= amin) {
      k += d[ax] > 0 ? 1 : -1;
      a = base + k * st;
    }
    next[ax] = a;
    inc[ax] = fabs(st);
    idx[ax] = clampl((long)(d[ax] > 0 ? k - 1 : k), 0, V.n[ax] - 1);
  }
  const long stride[3] = {V.n[1] * V.n[2], V.n[2], 1};
  long step[3], left[3], off = (idx[0] * V.n[1] + idx[1]) * V.n[2] + idx[2];
  for (int ax = 0; ax < 3; ax++) {
    step[ax] = d[ax] > 0 ? stride[ax] : -stride[ax];
    left[ax] = d[ax] > 0 ? V.n[ax] - 1 - idx[ax] : idx[ax];
  }
  const double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  const float *v = V.v;
  double p[3] = {0, 0, 0}, r[3] = {0, 0, 0};
  if (gs && ain >= 0) {
    double j = -(double)__ldg(v + off);
    p[ain] += j * (1 - amin);
    r[ain] += j * amin;
  }
  double acc = 0, a = amin;
  int exit_ax = aout;
  double exit_a = amax;
  for (;;) {
    int ax = 0;
    if (next[1] < next[ax]) ax = 1;
    if (next[2] < next[ax]) ax = 2;
    double b = next[ax] < amax ? next[ax] : amax;
    if (v) acc += (b - a) * __ldg(v + off);
    if (grad) atomicAdd(grad + off, g * len * (b - a));
    if (b >= amax) break;
    a = b;
    int out = 0;
    for (int q = 0; q < 3; q++) {
      if (next[q] <= b) {
        if (left[q] == 0) {
          exit_ax = q;
          exit_a = b;
          out = 1;
          break;
        }
        left[q]--;
        if (gs) {
          double j = (double)__ldg(v + off) - (double)__ldg(v + off + step[q]);
          p[q] += j * (1 - b);
          r[q] += j * b;
        }
        off += step[q];
        next[q] += inc[q];
      }
    }
    if (out) break;
  }
  if (gs) {
    if (exit_ax >= 0) {
      double j = (double)__ldg(v + off);
      p[exit_ax] += j * (1 - exit_a);
      r[exit_ax] += j * exit_a;
    }
    for (int ax = 0; ax < 3; ax++) {
      if (d[ax] == 0) continue;
      double c = -len / d[ax];
      gs[ax] = c * p[ax];
      gd[ax] = c * r[ax];
    }
  }
  return acc * len;
}

// A ray prepared for trilinear sampling (drrgrad.c's gray).
struct gray {
  double u[3], du[3];
  double fa, da, w;
  long count;
};

__device__ static int prepare(const vol &V, int padded, const double *src, const double *dst, double step, double lref,
                              gray *r) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (len == 0) return 0;
  double da = step / (lref > 0 ? lref : len);
  vol G = V;
  for (int ax = 0; ax < 3; ax++) {
    double half = padded ? 0.5 : -0.5;
    G.o[ax] += half * V.s[ax];
    G.n[ax] -= padded ? 1 : -1;
  }
  double amin, amax;
  int ain, aout;
  if (!clip(G, src, d, &amin, &amax, &ain, &aout)) return 0;
  double q0 = ceil(amin / da - 0.5), q1 = floor(amax / da - 0.5);
  if (q1 < q0) return 0;
  r->count = (long)(q1 - q0) + 1;
  r->da = da;
  r->fa = (q0 + 0.5) * da;
  r->w = da * len;
  for (int ax = 0; ax < 3; ax++) {
    r->u[ax] = (src[ax] + r->fa * d[ax] - V.o[ax]) / V.s[ax] - 0.5;
    r->du[ax] = da * d[ax] / V.s[ax];
  }
  return 1;
}

// cell: the sample's cell (low corner ijk, fractions t) and whether its
// eight corners lie in the volume; a padded volume clamps to its border.
__device__ static int cell(const long *n, int padded, double x, double y, double z, long *ijk, double *t) {
  if (padded) {
    long i = (long)(x > 0 ? x : 0), j = (long)(y > 0 ? y : 0), k = (long)(z > 0 ? z : 0);
    i = i < n[0] - 2 ? i : n[0] - 2;
    j = j < n[1] - 2 ? j : n[1] - 2;
    k = k < n[2] - 2 ? k : n[2] - 2;
    ijk[0] = i, ijk[1] = j, ijk[2] = k;
    t[0] = x - (double)i, t[1] = y - (double)j, t[2] = z - (double)k;
    return 1;
  }
  double fx = floor(x), fy = floor(y), fz = floor(z);
  ijk[0] = (long)fx, ijk[1] = (long)fy, ijk[2] = (long)fz;
  t[0] = x - fx, t[1] = y - fy, t[2] = z - fz;
  return ijk[0] >= 0 && ijk[1] >= 0 && ijk[2] >= 0 && ijk[0] < n[0] - 1 && ijk[1] < n[1] - 1 && ijk[2] < n[2] - 1;
}

__device__ static double trilinear(const vol &V, int padded, const gray &r, double *gs, double *gd) {
  const long *n = V.n;
  const long sj = n[2], si = n[1] * n[2];
  const float *v = V.v;
  double sum = 0, a0 = 0, a1 = 0, a2 = 0, b0 = 0, b1 = 0, b2 = 0;
  for (long q = 0; q < r.count; q++) {
    const double qd = (double)q;
    const double x = r.u[0] + qd * r.du[0], y = r.u[1] + qd * r.du[1], z = r.u[2] + qd * r.du[2];
    long ijk[3];
    double t[3], c[8];
    if (cell(n, padded, x, y, z, ijk, t)) {
      const float *p = v + ijk[0] * si + ijk[1] * sj + ijk[2];
      c[0] = __ldg(p), c[1] = __ldg(p + 1), c[2] = __ldg(p + sj), c[3] = __ldg(p + sj + 1);
      c[4] = __ldg(p + si), c[5] = __ldg(p + si + 1), c[6] = __ldg(p + si + sj), c[7] = __ldg(p + si + sj + 1);
    } else {
#pragma unroll
      for (int m = 0; m < 8; m++) {
        long ii = ijk[0] + (m >> 2), jj = ijk[1] + (m >> 1 & 1), kk = ijk[2] + (m & 1);
        c[m] = ii < 0 || jj < 0 || kk < 0 || ii >= n[0] || jj >= n[1] || kk >= n[2] ? 0 : __ldg(v + (ii * n[1] + jj) * n[2] + kk);
      }
    }
    const double tu = t[0], tv = t[1], tw = t[2];
    const double e00 = c[1] - c[0], e01 = c[3] - c[2], e10 = c[5] - c[4], e11 = c[7] - c[6];
    const double c00 = c[0] + tw * e00, c01 = c[2] + tw * e01, c10 = c[4] + tw * e10, c11 = c[6] + tw * e11;
    const double d0 = c01 - c00, d1 = c11 - c10;
    const double c0 = c00 + tv * d0, c1 = c10 + tv * d1;
    const double gu = c1 - c0;
    sum += c0 + tu * gu;
    if (gs) {
      const double gv = d0 + tu * (d1 - d0);
      const double w0 = e00 + tv * (e01 - e00), w1 = e10 + tv * (e11 - e10);
      const double gw = w0 + tu * (w1 - w0);
      a0 += gu, a1 += gv, a2 += gw;
      b0 += qd * gu, b1 += qd * gv, b2 += qd * gw;
    }
  }
  if (gs) {
    const double a[3] = {a0, a1, a2}, b[3] = {b0, b1, b2};
    for (int ax = 0; ax < 3; ax++) {
      double all = r.w * a[ax] / V.s[ax], far = r.w * (r.fa * a[ax] + r.da * b[ax]) / V.s[ax];
      gd[ax] = far;
      gs[ax] = all - far;
    }
  }
  return sum * r.w;
}

__device__ static void tri_back(const vol &V, int padded, const gray &r, double g, double *grad) {
  const long *n = V.n;
  const long sj = n[2], si = n[1] * n[2];
  const double gw = g * r.w;
  for (long q = 0; q < r.count; q++) {
    const double qd = (double)q;
    const double x = r.u[0] + qd * r.du[0], y = r.u[1] + qd * r.du[1], z = r.u[2] + qd * r.du[2];
    long ijk[3];
    double t[3];
    int in = cell(n, padded, x, y, z, ijk, t);
    const double tu = t[0], tv = t[1], tw = t[2];
#pragma unroll
    for (int m = 0; m < 8; m++) {
      long di = m >> 2, dj = m >> 1 & 1, dk = m & 1;
      long ii = ijk[0] + di, jj = ijk[1] + dj, kk = ijk[2] + dk;
      if (!in && (ii < 0 || jj < 0 || kk < 0 || ii >= n[0] || jj >= n[1] || kk >= n[2])) continue;
      double wt = gw * (di ? tu : 1 - tu) * (dj ? tv : 1 - tv) * (dk ? tw : 1 - tw);
      atomicAdd(grad + ii * si + jj * sj + kk, wt);
    }
  }
}

__device__ static int padded_ok(const long *n, long padded) { return padded && n[0] >= 2 && n[1] >= 2 && n[2] >= 2; }

} // namespace drrgrad

// out[r] and, when gsrc is not null, gsrc[3r:], gdst[3r:]: the line
// integral of ray r and its derivatives (tl_drr_grad).
extern "C" __global__ void drr_grad(const float *v, long nx, long ny, long nz, double ox, double oy, double oz,
                                    double sx, double sy, double sz, long padded, long nrays, const double *src,
                                    const double *dst, double step, double lref, double *out, double *gsrc,
                                    double *gdst) {
  long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= nrays) return;
  drrgrad::vol V = {v, {nx, ny, nz}, {ox, oy, oz}, {sx, sy, sz}};
  double gs[3], gd[3];
  double *ps = gsrc ? gs : 0, *pd = gsrc ? gd : 0;
  double o;
  if (step > 0) {
    drrgrad::gray g;
    if (drrgrad::prepare(V, (int)padded, src + 3 * r, dst + 3 * r, step, lref, &g)) {
      o = drrgrad::trilinear(V, drrgrad::padded_ok(V.n, padded), g, ps, pd);
    } else {
      o = 0;
      gs[0] = gs[1] = gs[2] = gd[0] = gd[1] = gd[2] = 0;
    }
  } else {
    o = drrgrad::siddon(V, src + 3 * r, dst + 3 * r, ps, pd, 0, 0);
  }
  out[r] = o;
  if (gsrc) {
    for (int a = 0; a < 3; a++) {
      gsrc[3 * r + a] = gs[a];
      gdst[3 * r + a] = gd[a];
    }
  }
}

// grad (nx·ny·nz doubles) += Σ_r g[r]·∂out[r]/∂v: the adjoint of drr_grad's
// map from the volume's values to the integrals (tl_drr_backproject), by
// atomic additions.
extern "C" __global__ void drr_backproject(long nx, long ny, long nz, double ox, double oy, double oz, double sx,
                                           double sy, double sz, long padded, long nrays, const double *src,
                                           const double *dst, double step, double lref, const double *g,
                                           double *grad) {
  long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= nrays || g[r] == 0) return;
  drrgrad::vol V = {0, {nx, ny, nz}, {ox, oy, oz}, {sx, sy, sz}};
  if (step <= 0) {
    drrgrad::siddon(V, src + 3 * r, dst + 3 * r, 0, 0, g[r], grad);
    return;
  }
  drrgrad::gray gr;
  if (drrgrad::prepare(V, (int)padded, src + 3 * r, dst + 3 * r, step, lref, &gr))
    drrgrad::tri_back(V, drrgrad::padded_ok(V.n, padded), gr, g[r], grad);
}
