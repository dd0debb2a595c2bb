// The kernels of wavelet.c for one instruction set: wavelet.c includes
// this file once per set, with its target pragma in force and W (doubles
// per vector) and SFX(name) (the set's copy of a name) defined.

typedef double SFX(vd) __attribute__((vector_size(W * sizeof(double)), aligned(sizeof(double))));
typedef int64_t SFX(vl) __attribute__((vector_size(W * sizeof(double)), aligned(sizeof(double))));
typedef float SFX(vf) __attribute__((vector_size(W * sizeof(float)), aligned(sizeof(float))));
#define VD SFX(vd)
#define VL SFX(vl)
#define VF SFX(vf)

// sel is m ? x : y lane by lane, m a comparison's mask.
static inline VD SFX(sel)(VL m, VD x, VD y) { return (VD)((m & (VL)x) | (~m & (VL)y)); }

// vexp is exp(x) for x in [−700, 0]: x = k·ln 2 + r with |r| ≤ ln 2 / 2,
// exp(r) by its Taylor polynomial of degree 12 (error below 2⁻⁵³ there),
// 2^k put into the exponent bits.
static inline VD SFX(vexp)(VD x) {
  const VD shifter = (VD){0} + 0x1.8p52; // adding it rounds to an integer
  VD t = x * 1.4426950408889634 + shifter;
  VL k = (VL)t - (VL)shifter;
  t -= shifter;
  VD r = x - t * 6.93147180369123816490e-01 - t * 1.90821492927058770002e-10;
  VD q = (VD){0} + 1.0 / 479001600;
  q = q * r + 1.0 / 39916800;
  q = q * r + 1.0 / 3628800;
  q = q * r + 1.0 / 362880;
  q = q * r + 1.0 / 40320;
  q = q * r + 1.0 / 5040;
  q = q * r + 1.0 / 720;
  q = q * r + 1.0 / 120;
  q = q * r + 1.0 / 24;
  q = q * r + 1.0 / 6;
  q = q * r + 0.5;
  q = q * r + 1;
  q = q * r + 1;
  return q * (VD)((k + 1023) << 52);
}

// hat_terms adds c·s·exp(−s/2) to acc[k] for k in [lo, hi) (multiples of
// W), s = γ + z·(2β + b22·z), z = z0 + dz·k. Along the row exp(−s/2) is a
// Gaussian in k: one vexp gives it for the first W lanes and one its ratio
// W lanes on, which itself changes by a constant factor, so each further
// vector costs two multiplies instead of an exp.
// q is exp(−b22·(W·dz)²), the same for every row.
static inline void SFX(hat_terms)(double *acc, int64_t lo, int64_t hi, double gamma, double beta, double b22,
                                  double z0, double dz, double q) {
  VD kk = (VD){0} + (double)lo;
  for (int l = 0; l < W; l++) kk[l] += l;
  const double wdz = W * dz;
  VD z = z0 + dz * kk;
  VD s = gamma + z * (2 * beta + b22 * z);
  VD e = SFX(vexp)(SFX(sel)(s > 1400, (VD){0} - 700, -0.5 * s));
  VD r = SFX(vexp)(SFX(sel)(-0.5 * wdz * (2 * beta + b22 * (2 * z + wdz)) < -700, (VD){0} - 700,
                            -0.5 * wdz * (2 * beta + b22 * (2 * z + wdz))));
  for (int64_t k = lo; k < hi; k += W) {
    *(VD *)(acc + k) += s * e;
    z += wdz;
    s = gamma + z * (2 * beta + b22 * z);
    e *= r;
    r *= q;
  }
}

static void SFX(hat_mul)(const float *spec, float *dst, const int64_t *p, int64_t i0, int64_t i1, int64_t j0,
                         int64_t j1, const double *b, double c, double thr, double *acc, double *rowenergy,
                         double *rowgenergy, double *dc) {
  const double tp = 2 * M_PI;
  const int64_t p0 = p[0], p1 = p[1], p2 = p[2], h = p2 / 2 + 1, hw = (h + W - 1) / W * W;
  const double b00 = b[0], b01 = b[1], b02 = b[2], b11 = b[3], b12 = b[4], b22 = b[5];
  // The ellipsoid sᵀBs < thr lies in |ω_a| ≤ √(thr·M_aa), M = B⁻¹.
  const double det = b00 * (b11 * b22 - b12 * b12) - b01 * (b01 * b22 - b02 * b12) + b02 * (b01 * b12 - b11 * b02);
  const double e0 = sqrt(thr * (b11 * b22 - b12 * b12) / det), e1 = sqrt(thr * (b00 * b22 - b02 * b02) / det);
  // The least s over z in a row: the Schur complement of b22.
  const double s00 = b00 - b02 * b02 / b22, s01 = b01 - b02 * b12 / b22, s11 = b11 - b12 * b12 / b22;
  const double zmax = tp * (double)(h - 1) / (double)p2, dz = tp / (double)p2;
  const double itp = 1 / tp, idz = 1 / dz, ib22 = 1 / b22, q = exp(-b22 * (W * dz) * (W * dz));
  for (int64_t j = j0; j < j1; j++) rowenergy[j - j0] = 0;
  if (rowgenergy)
    for (int64_t j = j0; j < j1; j++) rowgenergy[j - j0] = 0;
  for (int64_t i = i0; i < i1; i++) {
    const double w0 = tp * (double)(i <= p0 / 2 ? i : i - p0) / (double)p0;
    const int64_t m0lo = (int64_t)ceil((-e0 - w0) * itp), m0hi = (int64_t)floor((e0 - w0) * itp);
    for (int64_t j = j0; j < j1; j++) {
      VD energy = (VD){0};
      const double w1 = tp * (double)(j <= p1 / 2 ? j : j - p1) / (double)p1;
      const int64_t m1lo = (int64_t)ceil((-e1 - w1) * itp), m1hi = (int64_t)floor((e1 - w1) * itp);
      for (int64_t k = 0; k < hw; k += W) *(VD *)(acc + k) = (VD){0};
      for (int64_t m0 = m0lo; m0 <= m0hi; m0++) {
        const double a0 = w0 + tp * (double)m0;
        for (int64_t m1 = m1lo; m1 <= m1hi; m1++) {
          const double a1 = w1 + tp * (double)m1;
          const double smin = s00 * a0 * a0 + 2 * s01 * a0 * a1 + s11 * a1 * a1;
          if (!(smin < thr)) continue;
          // s(z) = γ + 2βz + b22·z² < thr for |z − zc| < r.
          const double beta = b02 * a0 + b12 * a1, gamma = b00 * a0 * a0 + 2 * b01 * a0 * a1 + b11 * a1 * a1;
          const double zc = -beta * ib22, r = sqrt((thr - smin) * ib22);
          for (int64_t m2 = (int64_t)ceil((zc - r - zmax) * itp); m2 <= (int64_t)floor((zc + r) * itp); m2++) {
            const double z0 = tp * (double)m2;
            int64_t lo = (int64_t)ceil((zc - r - z0) * idz), hi = (int64_t)floor((zc + r - z0) * idz) + 1;
            lo = lo < 0 ? 0 : lo / W * W;
            hi = hi > h ? hw : (hi + W - 1) / W * W;
            if (lo < hi) SFX(hat_terms)(acc, lo, hi, gamma, beta, b22, z0, dz, q);
          }
        }
      }
      for (int64_t k = h; k < hw; k++) acc[k] = 0; // lanes past the row
      const int64_t row = (i * p1 + j) * h;
      const float *sp = spec + 2 * row;
      float *dp = dst ? dst + 2 * row : NULL;
      VD genergy = (VD){0};
      double gtail = 0;
      int64_t k = 0;
      for (; k + W <= h; k += W) {
        VD v = c * *(VD *)(acc + k);
        energy += v * v;
        *(VD *)(acc + k) = v;
        if (rowgenergy) { // |spec|²·ψ̂², each ψ̂² twice for the real and imaginary parts
          const VD v2 = v * v;
          const VD s0 = __builtin_convertvector(*(const VF *)(sp + 2 * k), VD);
          const VD s1 = __builtin_convertvector(*(const VF *)(sp + 2 * k + W), VD);
          genergy += s0 * s0 * __builtin_shuffle(v2, DUPLO) + s1 * s1 * __builtin_shuffle(v2, DUPHI);
        }
        if (dp) {
          // Each value twice, for the real and imaginary parts, in registers.
          const VF lo = __builtin_convertvector(__builtin_shuffle(v, DUPLO), VF);
          const VF hi = __builtin_convertvector(__builtin_shuffle(v, DUPHI), VF);
          *(VF *)(dp + 2 * k) = *(const VF *)(sp + 2 * k) * lo;
          *(VF *)(dp + 2 * k + W) = *(const VF *)(sp + 2 * k + W) * hi;
        }
      }
      if (k < hw) { // the last lanes, zero past the row
        VD v = c * *(VD *)(acc + k);
        energy += v * v;
        *(VD *)(acc + k) = v;
        for (; k < h; k++) {
          if (rowgenergy) {
            const double re = sp[2 * k], im = sp[2 * k + 1];
            gtail += (re * re + im * im) * (acc[k] * acc[k]);
          }
          if (dp) {
            const float f = (float)acc[k];
            dp[2 * k] = sp[2 * k] * f;
            dp[2 * k + 1] = sp[2 * k + 1] * f;
          }
        }
      }
      // Each coefficient but the first and (p2 even) the last stands for
      // itself and its mirror image.
      double e = -0.5 * acc[0] * acc[0];
      if (p2 % 2 == 0) e -= 0.5 * acc[h - 1] * acc[h - 1];
      for (int l = 0; l < W; l++) e += energy[l];
      rowenergy[j - j0] += 2 * e;
      if (rowgenergy) {
        const double a0 = (double)sp[0] * sp[0] + (double)sp[1] * sp[1];
        double g = gtail - 0.5 * a0 * (acc[0] * acc[0]);
        if (p2 % 2 == 0) {
          const double al = (double)sp[2 * h - 2] * sp[2 * h - 2] + (double)sp[2 * h - 1] * sp[2 * h - 1];
          g -= 0.5 * al * (acc[h - 1] * acc[h - 1]);
        }
        for (int l = 0; l < W; l++) g += genergy[l];
        rowgenergy[j - j0] += 2 * g;
      }
      if (dc && i == 0 && j == 0) *dc = (double)sp[0] * acc[0];
    }
  }
}

// block_sums_of is block_sums for a constant what (1: Σ g and Σ g², 2:
// max g, 3: both), so that what is left out costs nothing in the loop.
static inline __attribute__((always_inline)) void SFX(block_sums_of)(const float *x, int64_t ld, int64_t n1, int64_t n2,
                                                                     double *out, const int what) {
  VD s0 = (VD){0}, s1 = (VD){0}, q0 = (VD){0}, q1 = (VD){0}, mx = (VD){0} - INFINITY;
  double s = 0, q = 0, m = -INFINITY;
  for (int64_t j = 0; j < n1; j++) {
    const float *row = x + j * ld;
    int64_t k = 0;
    for (; k + 2 * W <= n2; k += 2 * W) {
      VF f0 = *(const VF *)(row + k), f1 = *(const VF *)(row + k + W);
      VD g0 = __builtin_convertvector(f0, VD), g1 = __builtin_convertvector(f1, VD);
      if (what & 1) {
        s0 += g0;
        s1 += g1;
        q0 += g0 * g0;
        q1 += g1 * g1;
      }
      if (what & 2) {
        mx = SFX(sel)((g0 > mx) | (g0 != g0), g0, mx);
        mx = SFX(sel)((g1 > mx) | (g1 != g1), g1, mx);
      }
    }
    for (; k < n2; k++) {
      const double g = row[k];
      if (what & 1) {
        s += g;
        q += g * g;
      }
      if (what & 2) m = (g > m || g != g) ? g : m;
    }
  }
  s0 += s1;
  q0 += q1;
  for (int l = 0; l < W; l++) {
    s += s0[l];
    q += q0[l];
    m = (mx[l] > m || mx[l] != mx[l]) ? mx[l] : m;
  }
  if (what & 1) out[0] = s, out[1] = q;
  if (what & 2) out[2] = m;
}

static void SFX(block_sums)(const float *x, int64_t ld, int64_t n1, int64_t n2, double *out, int what) {
  switch (what) {
  case 1: SFX(block_sums_of)(x, ld, n1, n2, out, 1); break;
  case 2: SFX(block_sums_of)(x, ld, n1, n2, out, 2); break;
  default: SFX(block_sums_of)(x, ld, n1, n2, out, 3);
  }
}

// half_energy sets out[j − j0], j0 ≤ j < j1, to the rows' part of
// Σ |c|² over the whole spectrum whose half c is (p0·p1·(p2/2+1) complex
// floats, interleaved): per row, every coefficient twice but the first
// and, p2 even, the last (their mirror images are not stored), added over
// i in order.
static void SFX(half_energy)(const float *c, int64_t p0, int64_t p1, int64_t p2, int64_t j0, int64_t j1, double *out) {
  const int64_t h = p2 / 2 + 1;
  for (int64_t j = j0; j < j1; j++) out[j - j0] = 0;
  for (int64_t i = 0; i < p0; i++) {
    for (int64_t j = j0; j < j1; j++) {
      const float *row = c + 2 * (i * p1 + j) * h;
      VD e0 = (VD){0}, e1 = (VD){0};
      int64_t f = 0;
      for (; f + 2 * W <= 2 * h; f += 2 * W) {
        const VD a = __builtin_convertvector(*(const VF *)(row + f), VD);
        const VD b = __builtin_convertvector(*(const VF *)(row + f + W), VD);
        e0 += a * a;
        e1 += b * b;
      }
      e0 += e1;
      double e = 0;
      for (int l = 0; l < W; l++) e += e0[l];
      for (; f < 2 * h; f++) e += (double)row[f] * row[f];
      e *= 2;
      e -= (double)row[0] * row[0] + (double)row[1] * row[1];
      if (p2 % 2 == 0) e -= (double)row[2 * h - 2] * row[2 * h - 2] + (double)row[2 * h - 1] * row[2 * h - 1];
      out[j - j0] += e;
    }
  }
}

#undef VD
#undef VL
#undef VF
