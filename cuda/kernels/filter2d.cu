// Separable 2-D filters of a batch of float32 images (ops.Filter2D): a
// pass along the rows, then one down the columns, each one thread per
// pixel, summed as internal/cpukern/filter.c sums (in float, taps in
// order from w[0]·x). mode 0 extends an image by half-sample symmetric
// reflection (scipy.ndimage's 'reflect'), 1 by its edge pixel ('nearest').

__device__ static long filt_ext(long i, long n, long mode) {
  if (i >= 0 && i < n) return i;
  if (mode == 1) return i < 0 ? 0 : n - 1;
  long m = i % (2 * n);
  if (m < 0) m += 2 * n;
  return m >= n ? 2 * n - 1 - m : m;
}

// filter_rows: out[l·n + c] = Σ_k w[k]·in[l·n + ext(c + k − h)] for the
// lines l < lines of n pixels.
extern "C" __global__ void filter_rows(const float *in, float *out, long lines, long n, const float *w, long nw, long h,
                                       long mode) {
  const long total = lines * n;
  for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long)gridDim.x * blockDim.x) {
    const long c = t % n;
    const float *x = in + (t - c);
    float s = w[0] * x[filt_ext(c - h, n, mode)];
    for (long k = 1; k < nw; k++) s += w[k] * x[filt_ext(c + k - h, n, mode)];
    out[t] = s;
  }
}

// filter_cols: out[(p·rows + r)·cols + c] = Σ_k w[k]·in[(p·rows + ext(r + k
// − h))·cols + c] for the images p < images of rows × cols pixels.
extern "C" __global__ void filter_cols(const float *in, float *out, long images, long rows, long cols, const float *w,
                                       long nw, long h, long mode) {
  const long total = images * rows * cols;
  for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long)gridDim.x * blockDim.x) {
    const long c = t % cols, g = t / cols, r = g % rows;
    const float *x = in + (g - r) * cols + c;
    float s = w[0] * x[filt_ext(r - h, rows, mode) * cols];
    for (long k = 1; k < nw; k++) s += w[k] * x[filt_ext(r + k - h, rows, mode) * cols];
    out[t] = s;
  }
}
