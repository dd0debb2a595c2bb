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
