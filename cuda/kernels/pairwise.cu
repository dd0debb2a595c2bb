// Pairwise affinities: a block of m rows against nc images,
// out[i·ldo + j] = −Σ_k |a_ik − b_jk| (l1), −Σ_k (a_ik − b_jk)² (l2),
// Σ_k a_ik·b_jk (dot), or the dot over ‖a_i‖·‖b_j‖ (cosine: rinv[i] =
// 1/‖a_i‖, cnorm[j] = ‖b_j‖). Blocks of 256 threads (16×16) compute tiles
// of 16R×16R outputs, R×R per thread, the rows' and images' k-slices
// staged in shared memory 16 at a time; sums in float32 per pair, in k
// order. With R = 8 a thread reads 2R = 16 shared values for R² = 64
// pairs of 2 arithmetic instructions each (l1: a subtraction and an add of
// its absolute value), so the arithmetic units, not shared memory, bound
// it (R = 4 reads twice as much per pair). __launch_bounds__(256, 2)
// holds the kernels to 128 registers (ptxas for sm_90: 100–122, no
// spills), so two blocks fit on an SM.
// Scalar parameters are 8 bytes wide: gorgonia.org/cu passes 8 bytes
// per kernel argument.

#define KT 16
#define TILE8 __launch_bounds__(256, 2)

// External linkage on purpose: a static template gets names with a per-build
// hash in the PTX, which would make the committed PTX differ between clones.
template <int METRIC, int R>
__device__ void tile(const float *a, long m, const float *b, long nc, long d, float *out, long ldo,
                     const double *rinv, const double *cnorm) {
  constexpr int TS = 16 * R;
  __shared__ float As[KT][TS + 1], Bs[KT][TS + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const long row0 = (long)blockIdx.y * TS, col0 = (long)blockIdx.x * TS;
  float acc[R][R];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < R; j++) acc[i][j] = 0;
  for (long k0 = 0; k0 < d; k0 += KT) {
    for (int e = threadIdx.x; e < TS * KT; e += blockDim.x) {
      const int r = e / KT, kk = e % KT;
      const long gk = k0 + kk, gr = row0 + r, gc = col0 + r;
      As[kk][r] = gr < m && gk < d ? a[gr * d + gk] : 0.0f;
      Bs[kk][r] = gc < nc && gk < d ? b[gc * d + gk] : 0.0f;
    }
    __syncthreads();
    const int kn = d - k0 < KT ? (int)(d - k0) : KT;
    for (int kk = 0; kk < kn; kk++) {
      float av[R], bv[R];
      for (int i = 0; i < R; i++) av[i] = As[kk][ty + 16 * i];
      for (int j = 0; j < R; j++) bv[j] = Bs[kk][tx + 16 * j];
      for (int i = 0; i < R; i++)
        for (int j = 0; j < R; j++) {
          if (METRIC == 0)
            acc[i][j] += fabsf(av[i] - bv[j]);
          else if (METRIC == 1)
            acc[i][j] += (av[i] - bv[j]) * (av[i] - bv[j]);
          else
            acc[i][j] += av[i] * bv[j];
        }
    }
    __syncthreads();
  }
  for (int i = 0; i < R; i++)
    for (int j = 0; j < R; j++) {
      const long r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r >= m || c >= nc) continue;
      float v = acc[i][j];
      if (METRIC <= 1) v = -v;
      if (METRIC == 3) v = (float)((double)v * rinv[r] / cnorm[c]);
      out[r * ldo + c] = v;
    }
}

extern "C" __global__ void TILE8 pairwise_l1(const float *a, long m, const float *b, long nc, long d,
                                             float *out, long ldo, const double *rinv, const double *cnorm) {
  tile<0, 8>(a, m, b, nc, d, out, ldo, rinv, cnorm);
}
extern "C" __global__ void TILE8 pairwise_l2(const float *a, long m, const float *b, long nc, long d,
                                             float *out, long ldo, const double *rinv, const double *cnorm) {
  tile<1, 8>(a, m, b, nc, d, out, ldo, rinv, cnorm);
}
extern "C" __global__ void TILE8 pairwise_dot(const float *a, long m, const float *b, long nc, long d,
                                              float *out, long ldo, const double *rinv, const double *cnorm) {
  tile<2, 8>(a, m, b, nc, d, out, ldo, rinv, cnorm);
}
extern "C" __global__ void TILE8 pairwise_cosine(const float *a, long m, const float *b, long nc, long d,
                                                 float *out, long ldo, const double *rinv, const double *cnorm) {
  tile<3, 8>(a, m, b, nc, d, out, ldo, rinv, cnorm);
}

// After a GEMM of dot products (cuBLAS): out[i·ldo + j] ×= rinv[i] / cnorm[j]
// over the m×nc block, the cosine.
extern "C" __global__ void cosine_scale(float *out, long m, long nc, long ldo, const double *rinv,
                                        const double *cnorm) {
  const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= m * nc) return;
  const long i = t / nc, j = t % nc;
  out[i * ldo + j] = (float)((double)out[i * ldo + j] * rinv[i] / cnorm[j]);
}

// out[c·ldo + r] = in[r·ldi + c] for r < rows, c < cols, through 32×32
// tiles in shared memory, so that both sides are read and written in whole
// rows: the transpose of a symmetric block's columns below it.
extern "C" __global__ void transpose(const float *in, long ldi, long rows, long cols, float *out, long ldo) {
  __shared__ float t[32][33];
  const long r0 = (long)blockIdx.y * 32, c0 = (long)blockIdx.x * 32;
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32; // 256 threads: 32×8
  for (int i = ty; i < 32; i += 8)
    if (r0 + i < rows && c0 + tx < cols) t[i][tx] = in[(r0 + i) * ldi + c0 + tx];
  __syncthreads();
  for (int i = ty; i < 32; i += 8)
    if (c0 + i < cols && r0 + tx < rows) out[(c0 + i) * ldo + r0 + tx] = t[tx][i];
}

// The top k of each of a block's rows, as ops.TopK selects them: the
// largest values, the row's own column (self0 + row) skipped, equal values
// ranking the smaller column first. One block of NT threads per row: each
// thread keeps the best k (≤ TK) of its columns (a strided share, so the
// row is read in whole lines), then the lists are merged pairwise in
// shared memory. vals and idx get k per row, best first. topk_rows takes
// k ≤ 32 with 128 threads, topk_rows128 k ≤ 128 with one warp (the lists
// in shared memory take NT·TK·8 = 32 KiB either way).

__device__ static bool better(float a, int ia, float b, int ib) { return a > b || (a == b && ia < ib); }

template <int TK, int NT>
__device__ void topk(const float *blk, long ldb, long n, long k, long self0, double *vals, double *idx) {
  __shared__ float sv[NT][TK];
  __shared__ int si[NT][TK];
  const long r = blockIdx.x;
  const float *row = blk + r * ldb;
  const long self = self0 + r;
  const int kk = (int)k;
  float v[TK];
  int ix[TK];
  int cnt = 0;
  for (long j = threadIdx.x; j < n; j += blockDim.x) {
    if (j == self) continue;
    const float x = row[j];
    if (cnt == kk && !better(x, (int)j, v[kk - 1], ix[kk - 1])) continue;
    int p = cnt < kk ? cnt++ : kk - 1;
    while (p > 0 && better(x, (int)j, v[p - 1], ix[p - 1])) {
      v[p] = v[p - 1];
      ix[p] = ix[p - 1];
      p--;
    }
    v[p] = x;
    ix[p] = (int)j;
  }
  for (int q = 0; q < kk; q++) { // short lists padded with entries below every affinity
    sv[threadIdx.x][q] = q < cnt ? v[q] : -INFINITY;
    si[threadIdx.x][q] = q < cnt ? ix[q] : 0x7fffffff;
  }
  __syncthreads();
  for (int s = 1; s < NT; s *= 2) {
    if (threadIdx.x % (2 * s) == 0) {
      const int o = threadIdx.x + s;
      int a = 0, b = 0;
      for (int q = 0; q < kk; q++) {
        if (better(sv[o][b], si[o][b], sv[threadIdx.x][a], si[threadIdx.x][a])) {
          v[q] = sv[o][b];
          ix[q] = si[o][b];
          b++;
        } else {
          v[q] = sv[threadIdx.x][a];
          ix[q] = si[threadIdx.x][a];
          a++;
        }
      }
      for (int q = 0; q < kk; q++) {
        sv[threadIdx.x][q] = v[q];
        si[threadIdx.x][q] = ix[q];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int q = 0; q < kk; q++) {
      vals[r * k + q] = (double)sv[0][q];
      idx[r * k + q] = (double)si[0][q];
    }
}

extern "C" __global__ void topk_rows(const float *blk, long ldb, long n, long k, long self0, double *vals,
                                     double *idx) {
  topk<32, 128>(blk, ldb, n, k, self0, vals, idx);
}
extern "C" __global__ void topk_rows128(const float *blk, long ldb, long n, long k, long self0, double *vals,
                                        double *idx) {
  topk<128, 32>(blk, ldb, n, k, self0, vals, idx);
}
