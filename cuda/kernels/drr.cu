// Digitally reconstructed radiographs, one thread per ray, a
// batch of poses per launch: the scalar paths of internal/cpukern/drr.c
// (Siddon's exact radiological path in double, or trilinear samples at
// fractions of each ray shared by the pose, zero outside the volume, read
// from a zero-padded volume).
//
// Pose p (12 doubles): source, centre of pixel (0, 0), the step along a
// row, the step down a column.

struct vol {
  const float *v;
  long n[3];
  double o[3], s[3];
};

__device__ static int clip(const vol &V, const double *src, const double *d, double *amin, double *amax) {
  double lo = 0, hi = 1;
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
    lo = fmax(lo, a0);
    hi = fmin(hi, a1);
  }
  *amin = lo;
  *amax = hi;
  return lo < hi;
}

__device__ static long clampl(long x, long lo, long hi) { return x < lo ? lo : (x > hi ? hi : x); }

__device__ static double siddon(const vol &V, const double *src, const double *dst) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double amin, amax;
  if (!clip(V, src, d, &amin, &amax)) return 0;
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
    inc[ax] = V.s[ax] / d[ax];
    double p = (src[ax] + amin * d[ax] - V.o[ax]) * inv;
    double k = d[ax] > 0 ? floor(p) + 1 : ceil(p) - 1;
    if (d[ax] > 0 && k < 1) k = 1;
    if (d[ax] < 0 && k > V.n[ax] - 1) k = V.n[ax] - 1;
    double a = base + k * inc[ax];
    while (a <= amin) {
      k += d[ax] > 0 ? 1 : -1;
      a = base + k * inc[ax];
    }
    next[ax] = a;
    inc[ax] = fabs(inc[ax]);
    idx[ax] = clampl((long)(d[ax] > 0 ? k - 1 : k), 0, V.n[ax] - 1);
  }
  const long stride[3] = {V.n[1] * V.n[2], V.n[2], 1};
  long step[3], left[3], off = (idx[0] * V.n[1] + idx[1]) * V.n[2] + idx[2];
  for (int ax = 0; ax < 3; ax++) {
    step[ax] = d[ax] > 0 ? stride[ax] : -stride[ax];
    left[ax] = d[ax] > 0 ? V.n[ax] - 1 - idx[ax] : idx[ax];
  }
  double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  double acc = 0, a = amin;
  for (;;) {
    int ax = 0;
    if (next[1] < next[ax]) ax = 1;
    if (next[2] < next[ax]) ax = 2;
    double b = next[ax] < amax ? next[ax] : amax;
    acc += (b - a) * V.v[off];
    if (b >= amax) break;
    a = b;
    for (int q = 0; q < 3; q++) {
      if (next[q] <= b) {
        if (left[q] == 0) return acc * len;
        left[q]--;
        off += step[q];
        next[q] += inc[q];
      }
    }
  }
  return acc * len;
}

// floor32 is floorf(x) clamped below at 0, for x < 2^22, with full-rate
// additions only: x + 2^23 rounded down is floor(x) + 2^23 exactly when
// x ≥ 0 (floats there are whole numbers), and below 2^23 when x < 0.
__device__ static float floor32(float x) { return fmaxf(__fadd_rd(x, 8388608.f) - 8388608.f, 0.f); }

// toint is the value of f, a whole number in [0, 2^23), read from the bits
// of f + 2^23: an integer operation where a conversion would take the
// GPU's quarter-rate conversion unit.
__device__ static int toint(float f) { return __float_as_int(f + 8388608.f) - 0x4B000000; }

// samples sums count trilinear samples at u + q·du (continuous indices,
// clamped to [0, hi] cells) of the volume v with strides si, sj. With I =
// int (the caller checks: count < 2^24, the volume under 2^31 voxels and
// under 2^22 on a side) q is counted in float (exact there), floors and
// offsets are taken with full-rate float and 32-bit integer operations;
// with I = long, as generally.
template <typename I>
__device__ static double samples(const float *v, I si, I sj, const float *u, const float *du, const float *hi,
                                 I count) {
  const bool small = sizeof(I) == 4;
  double acc = 0;
  float fq = 0;
  for (I q0 = 0; q0 < count; q0 += 64) { // summed in float over runs of 64 samples, then in double
    const I q1 = count - q0 < 64 ? count : q0 + 64;
    float part = 0;
    for (I q = q0; q < q1; q++, fq += 1.f) {
      const float qf = small ? fq : (float)q;
      float x = fmaf(qf, du[0], u[0]), y = fmaf(qf, du[1], u[1]), z = fmaf(qf, du[2], u[2]);
      // Rounding can put a sample a hair outside the box: clamp, reading
      // the zero border.
      float fi, fj, fk;
      if (small) {
        fi = fminf(floor32(x), hi[0]), fj = fminf(floor32(y), hi[1]), fk = fminf(floor32(z), hi[2]);
      } else {
        fi = fminf(fmaxf(floorf(x), 0.f), hi[0]), fj = fminf(fmaxf(floorf(y), 0.f), hi[1]),
        fk = fminf(fmaxf(floorf(z), 0.f), hi[2]);
      }
      float tu = fminf(fmaxf(x - fi, 0.f), 1.f), tv = fminf(fmaxf(y - fj, 0.f), 1.f),
            tw = fminf(fmaxf(z - fk, 0.f), 1.f);
      const I off = small ? (I)toint(fi) * si + (I)toint(fj) * sj + (I)toint(fk) : (I)fi * si + (I)fj * sj + (I)fk;
      const float *c = v + off;
      float c00 = fmaf(tw, __ldg(c + 1) - __ldg(c), __ldg(c));
      float c01 = fmaf(tw, __ldg(c + sj + 1) - __ldg(c + sj), __ldg(c + sj));
      float c10 = fmaf(tw, __ldg(c + si + 1) - __ldg(c + si), __ldg(c + si));
      float c11 = fmaf(tw, __ldg(c + si + sj + 1) - __ldg(c + si + sj), __ldg(c + si + sj));
      float c0 = fmaf(tv, c01 - c00, c00), c1 = fmaf(tv, c11 - c10, c10);
      part += fmaf(tu, c1 - c0, c0);
    }
    acc += part;
  }
  return acc;
}

// Samples at the fractions (q + ½)·step/lref of the segment from the
// source, each weighing step·len/lref mm. The volume carries a border of
// zero voxels (volume.Pad): samples whose continuous index (voxel
// centres at integers) lies in [0, n−1] on every axis read only voxels
// inside it, and outside that box every sample is zero. As on the CPU,
// positions advance in float32 (their rounding, ~1e-5 of a voxel over a
// ray, is far below the interpolation's own error) and the sum is kept in
// float32 over runs of 64 samples, then in double.
__device__ static double trilinear(const vol &V, const double *src, const double *dst, double step, double lref) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (len == 0) return 0;
  vol G = V;
  for (int ax = 0; ax < 3; ax++) {
    G.o[ax] += 0.5 * V.s[ax];
    G.n[ax] -= 1;
  }
  double amin, amax;
  if (!clip(G, src, d, &amin, &amax)) return 0;
  double da = step / lref;
  double q0 = ceil(amin / da - 0.5), q1 = floor(amax / da - 0.5);
  float u[3], du[3], hi[3];
  for (int ax = 0; ax < 3; ax++) {
    double a0 = (q0 + 0.5) * da;
    u[ax] = (float)((src[ax] + a0 * d[ax] - V.o[ax]) / V.s[ax] - 0.5);
    du[ax] = (float)(da * d[ax] / V.s[ax]);
    hi[ax] = (float)(V.n[ax] - 2);
  }
  const long sj = V.n[2], si = V.n[1] * V.n[2], count = (long)(q1 - q0) + 1;
  const long side = 1L << 22;
  double sum = count < (1L << 24) && V.n[0] * si < (1L << 31) && V.n[0] < side && V.n[1] < side && V.n[2] < side
                   ? samples<int>(V.v, (int)si, (int)sj, u, du, hi, (int)count)
                   : samples<long>(V.v, si, sj, u, du, hi, count);
  return sum * da * len;
}

// longest is the length of a pose's longest ray, to one of the detector's
// corners: trilinear samples lie step mm apart on it (ops.LongestRay).
__device__ static double longest(const double *pose, long rows, long cols) {
  double l = 0;
  for (int i = 0; i < 4; i++) {
    double r = (i & 1) ? (double)(rows - 1) : 0, c = (i & 2) ? (double)(cols - 1) : 0, s = 0;
    for (int a = 0; a < 3; a++) {
      double d = pose[3 + a] + c * pose[6 + a] + r * pose[9 + a] - pose[a];
      s += d * d;
    }
    l = fmax(l, sqrt(s));
  }
  return l;
}

// alongZ says whether a pixel step d runs along z, to a relative 1e-9 (as
// ops.alongZ).
__device__ static int alongZ(const double *d) {
  double n = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  return n > 0 && fabs(d[0]) <= 1e-9 * n && fabs(d[1]) <= 1e-9 * n;
}

// out[p·rows·cols + row·cols + col]: the line integral of the ray to pixel
// (row, col) of pose p; step ≤ 0 selects Siddon's path. Consecutive threads
// take consecutive pixels down a column when the pose's columns run along
// z (as in an orbit about z), else along a row: then a warp's rays share
// their x and y at every sample and read neighbouring voxels of the same
// columns of the volume, in few memory transactions. Scalar parameters are
// 8 bytes wide: gorgonia.org/cu passes 8 bytes per kernel argument.
extern "C" __global__ void drr(const float *v, long nx, long ny, long nz, double ox, double oy, double oz,
                               double sx, double sy, double sz, const double *poses, long nposes, long rows, long cols,
                               double step, float *out) {
  long rays = (long)rows * cols;
  long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rays * nposes) return;
  long p = t / rays, r = t % rays;
  const double *pose = poses + 12 * p;
  long ri = r / cols, ci = r % cols;
  if (alongZ(pose + 9)) ri = r % rows, ci = r / rows;
  double row = (double)ri, col = (double)ci;
  double dst[3];
  for (int a = 0; a < 3; a++) dst[a] = pose[3 + a] + col * pose[6 + a] + row * pose[9 + a];
  vol V = {v, {nx, ny, nz}, {ox, oy, oz}, {sx, sy, sz}};
  out[p * rays + ri * cols + ci] =
      (float)(step > 0 ? trilinear(V, pose, dst, step, longest(pose, rows, cols)) : siddon(V, pose, dst));
}
