// The wavelet sweep on the GPU, beside cuFFT: the kernel of one
// combination evaluated on its support box and added into the (zeroed)
// transform-sized array, wrapped around the origin (hat_scatter, which also
// sums ψ² per block); the product of two half spectra (cmul); and the
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
    const double q = (rp / a) * (rp / a) + (rT / (a * xi)) * (rT / (a * xi)) + (rp2 / a) * (rp2 / a);
    const double psi = (3 - q) * exp(-q / 2);
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
