// Interpolation of M cubic interpolants at a batch of queries,
// one thread per query: the query's cell and its four weights are computed
// once and shared by all M interpolants. Semantics as ops.InterpTable:
// xc = clamp(x, a, ub) − a, ix = ⌊xc/dx⌋, t = xc/dx − (ix + ½),
// start = clamp(ix, 0, G−2), w_k = A_k + t·(B_k + t·(C_k + t·D_k)).

__device__ static const double A[4] = {-1.0 / 16, 9.0 / 16, 9.0 / 16, -1.0 / 16};
__device__ static const double B[4] = {1.0 / 24, -9.0 / 8, 9.0 / 8, -1.0 / 24};
__device__ static const double C[4] = {1.0 / 4, -1.0 / 4, -1.0 / 4, 1.0 / 4};
__device__ static const double D[4] = {-1.0 / 6, 1.0 / 2, -1.0 / 2, 1.0 / 6};

__device__ static int weights(double x, double a, double dx, double ub, int g, double w[4]) {
  double xc = fmin(fmax(x, a), ub) - a;
  double ix = floor(xc / dx);
  double t = xc / dx - (ix + 0.5);
  int s = (int)fmin(fmax(ix, 0.0), (double)(g - 2));
  for (int k = 0; k < 4; k++) w[k] = A[k] + t * (B[k] + t * (C[k] + t * D[k]));
  return s;
}

// What interp1d_f32 computes for each query (its argument mode; ops names
// the same values in kernels.go): INTERP_GRAM Σ_j v_j² from the per-cell
// Gram entries gram[10·s …] (g00 g01 g02 g03 g11 g12 g13 g22 g23 g33);
// INTERP_COLSUM Σ_j v_j from the column sums; INTERP_SUMSQ Σ_j v_j² and
// INTERP_SUM Σ_j v_j over fpT, the (G+2, M) transposed padded table;
// INTERP_VALUES all M values, out (n, M).
enum interp_mode { INTERP_GRAM = 0, INTERP_COLSUM = 1, INTERP_SUMSQ = 2, INTERP_SUM = 3, INTERP_VALUES = 4 };

// Scalar parameters are 8 bytes wide: gorgonia.org/cu passes 8 bytes per
// kernel argument.
extern "C" __global__ void interp1d_f32(const float *x, long n, double a, double dx, double ub, long g, long m,
                                        long mode, const double *gram, const double *colsum, const float *fpT,
                                        float *out) {
  long q = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= n) return;
  double w[4];
  int s = weights((double)x[q], a, dx, ub, (int)g, w);
  if (mode == INTERP_GRAM) {
    const double *e = gram + 10 * (long)s;
    double r = w[0] * (w[0] * e[0] + 2 * (w[1] * e[1] + w[2] * e[2] + w[3] * e[3])) +
               w[1] * (w[1] * e[4] + 2 * (w[2] * e[5] + w[3] * e[6])) + w[2] * (w[2] * e[7] + 2 * w[3] * e[8]) +
               w[3] * w[3] * e[9];
    out[q] = (float)r;
    return;
  }
  if (mode == INTERP_COLSUM) {
    out[q] = (float)(w[0] * colsum[s] + w[1] * colsum[s + 1] + w[2] * colsum[s + 2] + w[3] * colsum[s + 3]);
    return;
  }
  const float w0 = (float)w[0], w1 = (float)w[1], w2 = (float)w[2], w3 = (float)w[3];
  const float *r0 = fpT + (long)s * m, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;
  double acc = 0;
  for (int j = 0; j < m; j++) {
    float v = w0 * r0[j] + w1 * r1[j] + w2 * r2[j] + w3 * r3[j];
    if (mode == INTERP_VALUES)
      out[(long)q * m + j] = v;
    else
      acc += mode == INTERP_SUMSQ ? (double)v * v : (double)v;
  }
  if (mode != INTERP_VALUES) out[q] = (float)acc;
}

// ---- Gradients (ops.Interp1DGrad) ----

// dweights sets dw to the derivatives of the weights of query x with
// respect to x, w_k'(t)/dx, zero where the query is clamped (x < a or
// x >= ub: the derivative from the right), and returns its start as
// weights does.
__device__ static int dweights(double x, double a, double dx, double ub, int g, double w[4], double dw[4]) {
  const double live = (x < a || x >= ub) ? 0.0 : 1.0 / dx;
  double xc = fmin(fmax(x, a), ub) - a;
  double ix = floor(xc / dx);
  double t = xc / dx - (ix + 0.5);
  int s = (int)fmin(fmax(ix, 0.0), (double)(g - 2));
  for (int k = 0; k < 4; k++) {
    w[k] = A[k] + t * (B[k] + t * (C[k] + t * D[k]));
    dw[k] = (B[k] + t * (2 * C[k] + t * 3 * D[k])) * live;
  }
  return s;
}

// interp1d_grad_x_f32: one thread per query, out[q] the derivative of
// Σ_o up[q, o]·output[q, o] with respect to x[q], for the forward mode
// (enum interp_mode): INTERP_GRAM 2·up[q]·wᵀ·Gram_s·w', INTERP_COLSUM
// up[q]·w'·colsum, INTERP_SUMSQ 2·up[q]·Σ_j v_j·v_j', INTERP_SUM
// up[q]·Σ_j v_j', INTERP_VALUES Σ_j up[q, j]·v_j' (up (n, M)); in double.
extern "C" __global__ void interp1d_grad_x_f32(const float *x, const float *up, long n, double a, double dx, double ub,
                                               long g, long m, long mode, const double *gram, const double *colsum,
                                               const float *fpT, float *out) {
  long q = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= n) return;
  double w[4], dw[4];
  int s = dweights((double)x[q], a, dx, ub, (int)g, w, dw);
  if (mode == INTERP_GRAM) {
    const double *e = gram + 10 * (long)s;
    double r0 = e[0] * dw[0] + e[1] * dw[1] + e[2] * dw[2] + e[3] * dw[3];
    double r1 = e[1] * dw[0] + e[4] * dw[1] + e[5] * dw[2] + e[6] * dw[3];
    double r2 = e[2] * dw[0] + e[5] * dw[1] + e[7] * dw[2] + e[8] * dw[3];
    double r3 = e[3] * dw[0] + e[6] * dw[1] + e[8] * dw[2] + e[9] * dw[3];
    out[q] = (float)(2 * (double)up[q] * (w[0] * r0 + w[1] * r1 + w[2] * r2 + w[3] * r3));
    return;
  }
  if (mode == INTERP_COLSUM) {
    const double *c = colsum + s;
    out[q] = (float)((double)up[q] * (dw[0] * c[0] + dw[1] * c[1] + dw[2] * c[2] + dw[3] * c[3]));
    return;
  }
  const float *r0 = fpT + (long)s * m, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;
  double acc = 0;
  for (long j = 0; j < m; j++) {
    double d = dw[0] * r0[j] + dw[1] * r1[j] + dw[2] * r2[j] + dw[3] * r3[j];
    if (mode == INTERP_VALUES)
      acc += (double)up[q * m + j] * d;
    else if (mode == INTERP_SUMSQ)
      acc += (w[0] * r0[j] + w[1] * r1[j] + w[2] * r2[j] + w[3] * r3[j]) * d;
    else
      acc += d;
  }
  if (mode == INTERP_SUMSQ)
    acc *= 2 * (double)up[q];
  else if (mode == INTERP_SUM)
    acc *= (double)up[q];
  out[q] = (float)acc;
}

// interp1d_grad_f_f32: one thread per interpolant j, the gradient of its
// values: acc[(s+k)·M + j] (double, (G+2, M)) gets w_k·c_qj for every
// query q in order, c_qj = up[q, j] (INTERP_VALUES), 2·up[q]·v_qj
// (INTERP_SUMSQ) or up[q] (INTERP_SUM); then out[j, i] = acc[(i+1)·M + j],
// (M, G). A thread owns its column: no atomics, and every sum in the
// order of the CPU kernel (tl_interp_grad_f).
extern "C" __global__ void interp1d_grad_f_f32(const float *x, const float *up, long n, double a, double dx,
                                               double ub, long g, long m, long mode, const float *fpT, double *acc,
                                               float *out) {
  long j = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  for (long p = 0; p < g + 2; p++) acc[p * m + j] = 0;
  for (long q = 0; q < n; q++) {
    double w[4], dw[4];
    long s = dweights((double)x[q], a, dx, ub, (int)g, w, dw);
    double c;
    if (mode == INTERP_VALUES)
      c = up[q * m + j];
    else if (mode == INTERP_SUMSQ)
      c = 2 * (double)up[q] *
          (w[0] * fpT[s * m + j] + w[1] * fpT[(s + 1) * m + j] + w[2] * fpT[(s + 2) * m + j] +
           w[3] * fpT[(s + 3) * m + j]);
    else
      c = up[q];
    for (int k = 0; k < 4; k++) acc[(s + k) * m + j] += w[k] * c;
  }
  for (long i = 0; i < g; i++) out[j * g + i] = (float)acc[(i + 1) * m + j];
}
