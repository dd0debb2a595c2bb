// The wavelet sweep on the GPU, beside cuFFT: the hat's spectrum in closed
// form times the volume's (hat_spectrum, which also sums ψ² per block), or,
// where the hat is wider than the volume, the kernel of one combination
// evaluated on its support box and added into the (zeroed) transform-sized
// array, wrapped around the origin (hat_scatter, which also sums ψ² per
// block), then the product of two half spectra (cmul); and the
// response's sum, sum of squares and maximum over the output block
// (crop_stats), per block of threads, finished on the host. Definitions as
// ops.Hat and ops.WaveletVolume. Scalar parameters are 8 bytes wide:
// gorgonia.org/cu passes 8 bytes per kernel argument.

#define NT 256

__device__ static long wrapi(long i, long n) {
  long m = i % n;
  return m < 0 ? m + n : m;
}

extern "C" __global__ void hat_scatter(float *k, long p0, long p1, long p2, long h0, long h1, long h2, double a,
                                       double xi, double r00, double r01, double r02, double r10, double r11,
                                       double r12, double r20, double r21, double r22, double *part) {
  __shared__ double sh[NT];
  const long w1 = 2 * h1 + 1, w2 = 2 * h2 + 1, total = (2 * h0 + 1) * w1 * w2;
  double e = 0;
  for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long)gridDim.x * blockDim.x) {
    const double x = (double)(t / (w1 * w2) - h0), y = (double)((t / w2) % w1 - h1), z = (double)(t % w2 - h2);
    const double rT = r00 * x + r01 * y + r02 * z, rp = r10 * x + r11 * y + r12 * z, rp2 = r20 * x + r21 * y + r22 * z;
    const double u = rT == 0 ? 0 : rT / (a * xi); // 0 also where a·ξ is below the smallest double
    const double q = (rp / a) * (rp / a) + u * u + (rp2 / a) * (rp2 / a);
    const double psi = q < 2000 ? (3 - q) * exp(-q / 2) : 0; // q may be +Inf
    e += psi * psi;
    atomicAdd(&k[(wrapi((long)x, p0) * p1 + wrapi((long)y, p1)) * p2 + wrapi((long)z, p2)], (float)psi);
  }
  sh[threadIdx.x] = e;
  __syncthreads();
  for (int s = NT / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

// hat_spectrum sets half, the n = p0·p1·(p2/2+1) coefficients of a real
// array's half spectrum, to spec times the discrete transform of the
// Mexican hat sampled on the whole grid: the sum over the aliases m of
// c·s·exp(−s/2), s = (ω+2πm)ᵀB(ω+2πm) < thr, B = (b00 b01 b02; b01 b11
// b12; b02 b12 b22), ω the coefficient's frequency (ops.HatMul's closed
// form). The aliases of a coefficient lie in |ω_a + 2πm_a| ≤ e_a. Per
// block it writes the sum of the squared transform over the whole spectrum
// (the coefficients the half spectrum leaves out counted), times scale, to
// part: with scale 1/(p0·p1·p2), Σ ψ² by Parseval.
extern "C" __global__ void hat_spectrum(float2 *half, const float2 *spec, long p0, long p1, long p2, double b00,
                                        double b01, double b02, double b11, double b12, double b22, double c,
                                        double thr, double e0, double e1, double e2, double scale, double *part) {
  __shared__ double sh[NT];
  const double tp = 6.283185307179586;
  const long h = p2 / 2 + 1, n = p0 * p1 * h;
  double e = 0;
  for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (long)gridDim.x * blockDim.x) {
    const long i = t / (p1 * h), j = (t / h) % p1, k = t % h;
    const double w0 = tp * (double)(i <= p0 / 2 ? i : i - p0) / (double)p0;
    const double w1 = tp * (double)(j <= p1 / 2 ? j : j - p1) / (double)p1;
    const double w2 = tp * (double)k / (double)p2;
    double acc = 0;
    for (long m0 = (long)ceil((-e0 - w0) / tp); m0 <= (long)floor((e0 - w0) / tp); m0++) {
      const double a0 = w0 + tp * (double)m0;
      for (long m1 = (long)ceil((-e1 - w1) / tp); m1 <= (long)floor((e1 - w1) / tp); m1++) {
        const double a1 = w1 + tp * (double)m1;
        for (long m2 = (long)ceil((-e2 - w2) / tp); m2 <= (long)floor((e2 - w2) / tp); m2++) {
          const double a2 = w2 + tp * (double)m2;
          const double s = b00 * a0 * a0 + b11 * a1 * a1 + b22 * a2 * a2 + 2 * (b01 * a0 * a1 + b02 * a0 * a2 + b12 * a1 * a2);
          if (s < thr) acc += s * exp(-s / 2);
        }
      }
    }
    const double v = c * acc;
    const float f = (float)v;
    const float2 x = spec[t];
    half[t] = make_float2(x.x * f, x.y * f);
    e += (k == 0 || (p2 % 2 == 0 && k == h - 1) ? 1 : 2) * v * v;
  }
  sh[threadIdx.x] = e * scale;
  __syncthreads();
  for (int s = NT / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

extern "C" __global__ void cmul(float2 *a, const float2 *b, long n) {
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float2 x = a[i], y = b[i];
  a[i] = make_float2(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x);
}

// block_reduce reduces the block's per-thread sums a, b and maximum m (and sum e,
// where se is given) in the shared arrays; thread 0's entries hold the
// block's.
__device__ static void block_reduce(double *s1, double *s2, double *sm, double *se, double a, double b, double m,
                                    double e) {
  s1[threadIdx.x] = a;
  s2[threadIdx.x] = b;
  sm[threadIdx.x] = m;
  if (se) se[threadIdx.x] = e;
  __syncthreads();
  for (int s = NT / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      s1[threadIdx.x] += s1[threadIdx.x + s];
      s2[threadIdx.x] += s2[threadIdx.x + s];
      sm[threadIdx.x] = fmax(sm[threadIdx.x], sm[threadIdx.x + s]);
      if (se) se[threadIdx.x] += se[threadIdx.x + s];
    }
    __syncthreads();
  }
}

extern "C" __global__ void crop_stats(const float *g, long p1, long p2, long lo0, long lo1, long lo2, long n0,
                                      long n1, long n2, double scale, double *part) {
  __shared__ double s1[NT], s2[NT], sm[NT];
  double a = 0, b = 0, m = -INFINITY;
  const long total = n0 * n1 * n2;
  for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long)gridDim.x * blockDim.x) {
    const long i = t / (n1 * n2), j = (t / n2) % n1, k = t % n2;
    const double v = (double)g[((lo0 + i) * p1 + lo1 + j) * p2 + lo2 + k] * scale;
    a += v;
    b += v * v;
    m = fmax(m, v);
  }
  block_reduce(s1, s2, sm, 0, a, b, m, 0);
  if (threadIdx.x == 0) {
    part[3 * blockIdx.x] = s1[0];
    part[3 * blockIdx.x + 1] = s2[0];
    part[3 * blockIdx.x + 2] = sm[0];
  }
}

// The volume v (n0×n1×n2) extended to p0×p1×p2 by half-sample symmetric
// reflection, shifted by pad on every axis (ops.transformVolume's
// extension, repeated as often as a large padding needs; with no padding
// and p = n, a copy).
__device__ static long reflecti(long i, long n) {
  long m = i % (2 * n);
  if (m < 0) m += 2 * n;
  return m >= n ? 2 * n - 1 - m : m;
}

extern "C" __global__ void reflect_extend(const float *v, long n0, long n1, long n2, float *ext, long p0, long p1,
                                          long p2, long pad0, long pad1, long pad2) {
  const long total = p0 * p1 * p2;
  for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long)gridDim.x * blockDim.x) {
    const long k = t % p2, j = (t / p2) % p1, i = t / (p1 * p2);
    ext[t] = v[(reflecti(i - pad0, n0) * n1 + reflecti(j - pad1, n1)) * n2 + reflecti(k - pad2, n2)];
  }
}

// The partial sums of one combination finished on the device, in one block
// of NT threads: res[0] and res[1] the sums of the nstat blocks' sums and
// sums of squares, res[2] their maximum (part holds three per block),
// res[3] the sum of the nhat blocks' ψ² sums at hat.
extern "C" __global__ void finish_stats(const double *part, long nstat, const double *hat, long nhat, double *res) {
  __shared__ double s1[NT], s2[NT], sm[NT], se[NT];
  double a = 0, b = 0, m = -INFINITY, e = 0;
  for (long i = threadIdx.x; i < nstat; i += blockDim.x) {
    a += part[3 * i];
    b += part[3 * i + 1];
    m = fmax(m, part[3 * i + 2]);
  }
  for (long i = threadIdx.x; i < nhat; i += blockDim.x) e += hat[i];
  block_reduce(s1, s2, sm, se, a, b, m, e);
  if (threadIdx.x == 0) {
    res[0] = s1[0];
    res[1] = s2[0];
    res[2] = sm[0];
    res[3] = se[0];
  }
}
