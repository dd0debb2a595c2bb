// Tests of the arm64 NEON kernels (gemm_neon.c, pairu8_neon.c,
// pairdist_neon.c) on their own, without Go: built for arm64 and run
// under qemu-aarch64 by `make test-neon`. Each kernel is checked against
// a plain loop here on random inputs of odd sizes: bit for bit where the
// kernel's contract fixes the order of the sums (the packed matrix
// product, the exact 8-bit sums), and to the float64 definition where it
// does not. Built for x86-64 with gemm.c, it checks the AVX-512 packed
// matrix product against the same reference: both machines give a pair
// the same value.
#include "../gemm.h"
#include "../pairdist.h"
#include "../pairu8.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__aarch64__)
#define GEMM_NT tl_gemm_nt_f32_neon
#else
#define GEMM_NT tl_gemm_nt_f32_avx512
#endif

static int failures;

#define CHECK(cond, ...)                                                                                               \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                      \
      printf(__VA_ARGS__);                                                                                             \
      printf("\n");                                                                                                    \
      if (++failures > 20) exit(1);                                                                                    \
    }                                                                                                                  \
  } while (0)

// xorshift64*: the same numbers on every run.
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}
static float unif(void) { return (float)((rnd() >> 40) * 0x1p-24) * 2 - 1; } // in [−1, 1)
static float *randf(int64_t n) {
  float *x = malloc(sizeof(float) * (n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) x[i] = unif();
  return x;
}
static float *aligned(int64_t n) {
  float *x = aligned_alloc(64, (sizeof(float) * n + 63) / 64 * 64);
  for (int64_t i = 0; i < n; i++) x[i] = NAN;
  return x;
}

// dot_ref is the pair's value as the contract of gemm.h defines it: the
// products summed k by k from zero, fused, within each slice of
// TL_GEMM_KC, and the slices' sums added in order.
static float dot_ref(const float *x, const float *y, int64_t d) {
  float out = 0;
  for (int64_t k0 = 0; k0 < d; k0 += TL_GEMM_KC) {
    float s = 0;
    for (int64_t k = k0; k < d && k < k0 + TL_GEMM_KC; k++) s = fmaf(x[k], y[k], s);
    out = k0 == 0 ? s : out + s;
  }
  return out;
}

static double dot64(const float *x, const float *y, int64_t d) {
  double s = 0;
  for (int64_t k = 0; k < d; k++) s += (double)x[k] * y[k];
  return s;
}

// shifted is x's m rows (stride ld, d values) less mu, each value rounded
// to float32 once, in rows of d: what the packing reads with mu.
static float *shifted(const float *x, int64_t m, int64_t ld, int64_t d, const float *mu) {
  float *y = malloc(sizeof(float) * (m * d > 0 ? m * d : 1));
  for (int64_t i = 0; i < m; i++)
    for (int64_t k = 0; k < d; k++) y[i * d + k] = mu ? x[i * ld + k] - mu[k] : x[i * ld + k];
  return y;
}

// test_gemm_tile: tl_gemm_tile on a pack filled in two calls gives every
// pair on or above the shifted diagonal dot_ref's value bit for bit, and
// writes nothing else (sentinels around and below); with tails in the
// rows, the columns and the k slices, and diagonals that cut tiles. With
// shift, a and b are packed less a vector mu near their values (an offset
// of 100 on values in [−1, 1)): the pairs are dot_ref's of the rows less
// mu.
static void test_gemm_tile(int shift) {
  static const int64_t sz[][4] = {{1, 1, 1, -1},    {15, 33, 7, -1},   {29, 256, 385, -1}, {70, 31, 1000, -1},
                                  {8, 12, 384, -1}, {29, 45, 777, 0},  {37, 64, 300, 5},   {101, 200, 400, 33},
                                  {9, 20, 385, 100}, {64, 64, 64, 0}, {3, TL_GEMM_NC, 17, 0}, {17, TL_GEMM_NC - 1, 769, 7}};
  for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
    const int64_t m = sz[s][0], n = sz[s][1], d = sz[s][2], lower = sz[s][3];
    const int64_t lda = d + 3, ldb = d + 1, ldo = n + 5, am = (m + 7 + TL_GEMM_MR - 1) / TL_GEMM_MR * TL_GEMM_MR; // room for more rows
    float *a = randf(m * lda), *b = randf(n * ldb), *mu = NULL;
    if (shift) {
      for (int64_t i = 0; i < m * lda; i++) a[i] += 100;
      for (int64_t i = 0; i < n * ldb; i++) b[i] += 100;
      mu = randf(d);
      for (int64_t k = 0; k < d; k++) mu[k] = 100 + mu[k] / 8;
    }
    float *as = shifted(a, m, lda, d, mu), *bs = shifted(b, n, ldb, d, mu);
    float *ap = aligned(am * d), *bp = aligned((TL_GEMM_NC + TL_GEMM_NR - 1) / TL_GEMM_NR * TL_GEMM_NR * TL_GEMM_KC);
    float *out = malloc(sizeof(float) * (m * ldo + 5));
    const float sentinel = 12345;
    for (int64_t i = 0; i < m * ldo + 5; i++) out[i] = sentinel;
    const int64_t panels = (m + TL_GEMM_MR - 1) / TL_GEMM_MR;
    CHECK(tl_gemm_pack_a(m, d, a, lda, mu, 0, 1, ap) == 0, "pack_a failed");
    CHECK(tl_gemm_pack_a(m, d, a, lda, mu, 1, panels, ap) == 0, "pack_a failed");
    CHECK(tl_gemm_tile(m, m, d, ap, b, ldb, mu, n, bp, out, ldo, lower) == 0, "tile failed");
    double e2 = 0, w2 = 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ldo; j++) {
        const float g = out[i * ldo + j];
        if (j >= n || (lower >= 0 && j + lower < i)) {
          CHECK(g == sentinel, "tile %lld×%lld×%lld lower %lld: (%lld, %lld) outside the pairs written: %g", (long long)m,
                (long long)n, (long long)d, (long long)lower, (long long)i, (long long)j, g);
          continue;
        }
        const float want = dot_ref(as + i * d, bs + j * d, d);
        CHECK(memcmp(&g, &want, 4) == 0,
              "tile %lld×%lld×%lld lower %lld shift %d: pair (%lld, %lld) is %.9g, want %.9g", (long long)m,
              (long long)n, (long long)d, (long long)lower, shift, (long long)i, (long long)j, g, want);
        const double r = dot64(as + i * d, bs + j * d, d);
        e2 += (g - r) * (g - r), w2 += r * r;
      }
    CHECK(sqrt(e2 / w2) < 1e-6, "tile %lld×%lld×%lld: relative error %g against float64", (long long)m, (long long)n,
          (long long)d, sqrt(e2 / w2));
    CHECK(out[m * ldo] == sentinel, "guard after the last row written");
    free(a), free(b), free(mu), free(as), free(bs), free(ap), free(bp), free(out);
  }
}

// test_gemm_nt: the whole product (GEMM_NT) over several column tiles equals
// dot_ref, and with lower only the pairs on or above the diagonal are
// written.
static void test_gemm_nt(void) {
  static const int64_t sz[][4] = {{45, 1111, 500, -1}, {3, 529, 33, -1}, {70, 600, 400, 0}, {37, 300, 777, 5}};
  for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
    const int64_t m = sz[s][0], n = sz[s][1], d = sz[s][2], lower = sz[s][3], ldo = n + 3;
    float *a = randf(m * d), *b = randf(n * d), *out = malloc(sizeof(float) * m * ldo);
    for (int64_t i = 0; i < m * ldo; i++) out[i] = -1;
    CHECK(GEMM_NT(m, n, d, a, d, b, d, out, ldo, lower) == 0, "nt failed");
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ldo; j++) {
        const float g = out[i * ldo + j];
        if (j >= n || (lower >= 0 && j + lower < i)) {
          CHECK(g == -1, "nt: (%lld, %lld) written", (long long)i, (long long)j);
          continue;
        }
        const float want = dot_ref(a + i * d, b + j * d, d);
        CHECK(memcmp(&g, &want, 4) == 0, "nt %lld×%lld×%lld: pair (%lld, %lld) is %.9g, want %.9g", (long long)m,
              (long long)n, (long long)d, (long long)i, (long long)j, g, want);
      }
    free(a), free(b), free(out);
  }
}

// test_gemm_mirror: exactly the pairs strictly above the shifted diagonal
// are copied to their transposes; every other element of t is untouched.
static void test_gemm_mirror(void) {
  static const int64_t sz[][3] = {{1, 1, 0}, {1, 2, 0}, {17, 17, 0}, {40, 33, 0}, {40, 70, 9}, {100, 31, 64}, {5, 300, 2}};
  for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
    const int64_t m = sz[s][0], n = sz[s][1], lower = sz[s][2], ldo = n + 3, ldt = m + 5;
    float *out = randf(m * ldo), *t = malloc(sizeof(float) * n * ldt);
    for (int64_t i = 0; i < n * ldt; i++) t[i] = -777;
    tl_gemm_mirror(m, n, out, ldo, lower, t, ldt);
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = 0; i < ldt; i++) {
        const float g = t[j * ldt + i];
        if (i < m && j + lower > i)
          CHECK(g == out[i * ldo + j], "mirror %lld×%lld lower %lld: t(%lld, %lld) = %g, want %g", (long long)m,
                (long long)n, (long long)lower, (long long)j, (long long)i, g, out[i * ldo + j]);
        else
          CHECK(g == -777, "mirror %lld×%lld lower %lld: t(%lld, %lld) written", (long long)m, (long long)n,
                (long long)lower, (long long)j, (long long)i);
      }
    free(out), free(t);
  }
}

#if defined(__aarch64__)
// u8_ref is metric k of rows x and y (d bytes) in int64: the sum s and the
// rows' Σx², and the value as pairu8.h defines it (cosine in *c).
static int64_t u8_ref(int k, const uint8_t *x, const uint8_t *y, int64_t d, double *c) {
  int64_t dot = 0, l1 = 0, sa = 0, sb = 0;
  for (int64_t q = 0; q < d; q++) {
    const int64_t p = x[q], r = y[q];
    dot += p * r, l1 += p > r ? p - r : r - p, sa += p * p, sb += r * r;
  }
  *c = (double)dot / (sqrt((double)sa) * sqrt((double)sb));
  switch (k) {
  case TL_U8_L1: return -l1;
  case TL_U8_L2: return -(sa + sb - 2 * dot);
  default: return dot;
  }
}

static uint8_t *rand_u8(int64_t n, int64_t d) {
  uint8_t *x = malloc(n * d > 0 ? n * d : 1);
  for (int64_t i = 0; i < n * d; i++) x[i] = (uint8_t)(rnd() >> 56);
  for (int64_t i = 0; i < d && n > 1; i++) x[i] = 255; // the extremes: the largest sums
  return x;
}

// test_u8_sums: tl_u8_sums_neon's Σx and Σx² equal a plain loop's.
static void test_u8_sums(void) {
  static const int64_t sz[][2] = {{1, 1}, {5, 17}, {3, 2049}, {2, 300001}};
  for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
    const int64_t n = sz[s][0], d = sz[s][1];
    uint8_t *x = rand_u8(n, d);
    int64_t *sum = malloc(sizeof(int64_t) * n), *sq = malloc(sizeof(int64_t) * n);
    CHECK(tl_u8_sums_neon(x, n, d, sum, sq) == 0, "u8 sums did not run");
    for (int64_t i = 0; i < n; i++) {
      int64_t s1 = 0, s2 = 0;
      for (int64_t k = 0; k < d; k++) s1 += x[i * d + k], s2 += (int64_t)x[i * d + k] * x[i * d + k];
      CHECK(sum[i] == s1 && sq[i] == s2, "u8 sums n %lld d %lld row %lld: %lld %lld, want %lld %lld", (long long)n,
            (long long)d, (long long)i, (long long)sum[i], (long long)sq[i], (long long)s1, (long long)s2);
    }
    free(x), free(sum), free(sq);
  }
}

// test_u8_pairs: every metric of rows [1, n) against rows [0, n) into
// float64, int64 and float32 outputs with a row stride wider than n, bit
// equal to u8_ref, on the kernel level lvl; and the symmetric fill: the
// blocks of an (n, n) int64 matrix from their diagonal on with their
// transposes (tout), every element and the returned sum equal to the
// reference's, nothing written past the matrix.
static void test_u8_pairs(int lvl) {
  static const int64_t sz[][2] = {{1, 1}, {7, 63}, {13, 65}, {9, 1000}, {37, 1001}, {23, 4099}, {3, 300001}};
  tl_pair_u8_neon_limit(lvl);
  for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
    const int64_t n = sz[s][0], d = sz[s][1], a0 = n > 1 ? 1 : 0, m = n - a0, ldo = n + 3;
    uint8_t *x = rand_u8(n, d);
    int64_t *sum = malloc(sizeof(int64_t) * n), *sq = malloc(sizeof(int64_t) * n);
    tl_u8_sums_neon(x, n, d, sum, sq);
    double *o64 = malloc(sizeof(double) * m * ldo), c;
    int64_t *oi = malloc(sizeof(int64_t) * m * ldo);
    float *o32 = malloc(sizeof(float) * m * ldo);
    for (int k = TL_U8_L1; k <= TL_U8_COSINE; k++) {
      for (int64_t i = 0; i < m * ldo; i++) o64[i] = -7, oi[i] = -7, o32[i] = -7;
      const uint8_t *a = x + a0 * d;
      CHECK(tl_pair_u8_neon(m, n, d, a, d, x, d, k, sum + a0, sq + a0, sq, o64, NULL, TL_OUT_F64, ldo, n, NULL) == 0,
            "u8 did not run");
      CHECK(tl_pair_u8_neon(m, n, d, a, d, x, d, k, sum + a0, sq + a0, sq, o32, NULL, TL_OUT_F32, ldo, n, NULL) == 0,
            "u8 did not run");
      if (k != TL_U8_COSINE)
        tl_pair_u8_neon(m, n, d, a, d, x, d, k, sum + a0, sq + a0, sq, oi, NULL, TL_OUT_I64, ldo, n, NULL);
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldo; j++) {
          const int64_t at = i * ldo + j;
          if (j >= n) {
            CHECK(o64[at] == -7 && o32[at] == -7 && oi[at] == -7, "u8: guard (%lld, %lld) written", (long long)i,
                  (long long)j);
            continue;
          }
          const int64_t v = u8_ref(k, x + (a0 + i) * d, x + j * d, d, &c);
          const double w = k == TL_U8_COSINE ? c : (double)v;
          CHECK(o64[at] == w && o32[at] == (float)w && (k == TL_U8_COSINE || oi[at] == v),
                "u8 level %d n %lld d %lld metric %d pair (%lld, %lld): %.17g %.9g %lld, want %.17g", lvl, (long long)n,
                (long long)d, k, (long long)(a0 + i), (long long)j, o64[at], o32[at], (long long)oi[at], w);
        }
    }
    // The symmetric fill, in blocks of 5 rows, each from its diagonal on
    // in two calls split at an odd column.
    for (int k = TL_U8_L1; k <= TL_U8_DOT; k++) {
      int64_t *full = malloc(sizeof(int64_t) * (n * n + 1));
      for (int64_t i = 0; i <= n * n; i++) full[i] = -7;
      __int128 got = 0, want = 0;
      for (int64_t lo = 0; lo < n; lo += 5) {
        const int64_t bm = n - lo < 5 ? n - lo : 5, split = lo + (n - lo) / 3;
        const int64_t cuts[3] = {lo, split, n};
        for (int h = 0; h < 2; h++) {
          const int64_t c0 = cuts[h], nc = cuts[h + 1] - c0;
          if (nc <= 0) continue;
          int64_t ps[2];
          tl_pair_u8_neon(bm, nc, d, x + lo * d, d, x + c0 * d, d, k, sum + lo, sq + lo, sq + c0, full + lo * n + c0,
                          full + c0 * n + lo, TL_OUT_I64, n, lo + bm - c0 > 0 ? lo + bm - c0 : 0, ps);
          got += (__int128)(((unsigned __int128)(uint64_t)ps[1] << 64) | (uint64_t)ps[0]);
        }
      }
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
          const int64_t v = u8_ref(k, x + i * d, x + j * d, d, &c);
          want += v;
          CHECK(full[i * n + j] == v, "u8 symmetric level %d n %lld metric %d: (%lld, %lld) is %lld, want %lld", lvl,
                (long long)n, k, (long long)i, (long long)j, (long long)full[i * n + j], (long long)v);
        }
      CHECK(full[n * n] == -7, "u8 symmetric: written past the matrix");
      CHECK(got == want, "u8 symmetric level %d n %lld metric %d: the sum returned is off by %lld", lvl, (long long)n, k,
            (long long)(got - want));
      free(full);
    }
    free(x), free(sum), free(sq), free(o64), free(oi), free(o32);
  }
}

// pd_ref_T is pair (x, y)'s value as pairdist_neon.c defines the order:
// per k block of 1024, W lanes each summing every W-th term (fused where
// the kernel fuses), the lanes added in order, then the tail term by term,
// the block's sum added to the running value with the metric's sign.
#define PD_REF(T, SUF, W, FMA, ABS)                                                                                    \
  static T pd_ref_##SUF(int kern, const T *x, const T *y, int64_t d) {                                                 \
    T out = 0;                                                                                                         \
    for (int64_t k0 = 0; k0 < d; k0 += 1024) {                                                                         \
      const int64_t k1 = d - k0 < 1024 ? d : k0 + 1024, whole = k0 + (k1 - k0) / W * W;                               \
      T lane[W] = {0}, s = 0;                                                                                          \
      for (int64_t k = k0; k < k1; k++) {                                                                              \
        T *acc = k < whole ? &lane[(k - k0) % W] : &s;                                                                 \
        if (k == whole)                                                                                                \
          for (int l = 0; l < W; l++) s += lane[l];                                                                    \
        const T t = x[k] - y[k];                                                                                       \
        *acc = kern == TL_PAIR_L1 ? *acc + ABS(t) : kern == TL_PAIR_L2 ? FMA(t, t, *acc) : FMA(x[k], y[k], *acc);      \
      }                                                                                                                \
      if (whole == k1)                                                                                                 \
        for (int l = 0; l < W; l++) s += lane[l];                                                                      \
      out += kern == TL_PAIR_DOT ? s : -s;                                                                             \
    }                                                                                                                  \
    return out;                                                                                                        \
  }
PD_REF(float, f32, 4, fmaf, fabsf)
PD_REF(double, f64, 2, fma, fabs)

static double pd_def(int kern, const double *x, const double *y, int64_t d) {
  double s = 0;
  for (int64_t k = 0; k < d; k++)
    s += kern == TL_PAIR_L1 ? -fabs(x[k] - y[k]) : kern == TL_PAIR_L2 ? -(x[k] - y[k]) * (x[k] - y[k]) : x[k] * y[k];
  return s;
}

// test_pairdist: tl_pairdist_f32_neon (L1, L2) and tl_pairdist_f64_neon
// (L1, L2, dot) give every pair pd_ref's value bit for bit, the float64
// definition's to 1e-6 (float32) and 1e-14 (float64) relative error, and
// nothing outside the (m, n) window; the whole matrix equals the one
// computed in blocks at odd offsets.
static void test_pairdist(void) {
  static const int64_t sz[][3] = {{1, 1, 1}, {4, 4, 16}, {5, 7, 3}, {9, 130, 1031}, {13, 6, 2500}, {17, 300, 300}, {3, 33, 257}};
  for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
    const int64_t m = sz[s][0], n = sz[s][1], d = sz[s][2], lda = d + 1, ldb = d + 2, ldo = n + 3;
    float *a32 = randf(m * lda), *b32 = randf(n * ldb), *o32 = malloc(sizeof(float) * m * ldo);
    double *a64 = malloc(sizeof(double) * m * lda), *b64 = malloc(sizeof(double) * n * ldb), *o64 = malloc(sizeof(double) * m * ldo);
    for (int64_t i = 0; i < m * lda; i++) a64[i] = (double)a32[i] + unif() * 0x1p-30; // not float32 values
    for (int64_t i = 0; i < n * ldb; i++) b64[i] = (double)b32[i] + unif() * 0x1p-30;
    for (int kern = TL_PAIR_L1; kern <= TL_PAIR_DOT; kern++) {
      for (int64_t i = 0; i < m * ldo; i++) o32[i] = 12345, o64[i] = 12345;
      const int f32 = kern != TL_PAIR_DOT;
      if (f32) CHECK(tl_pairdist_f32_neon(m, n, d, a32, lda, b32, ldb, o32, ldo, kern) == 0, "f32 kernel %d did not run", kern);
      CHECK(tl_pairdist_f64_neon(m, n, d, a64, lda, b64, ldb, o64, ldo, kern) == 0, "f64 kernel %d did not run", kern);
      double e32 = 0, e64 = 0, den = 0;
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldo; j++) {
          const int64_t at = i * ldo + j;
          if (j >= n) {
            CHECK(o32[at] == 12345 && o64[at] == 12345, "pairdist: guard (%lld, %lld) written", (long long)i, (long long)j);
            continue;
          }
          const double w64 = pd_ref_f64(kern, a64 + i * lda, b64 + j * ldb, d);
          CHECK(memcmp(&o64[at], &w64, 8) == 0, "pairdist f64 %lld×%lld×%lld kernel %d: (%lld, %lld) is %.17g, want %.17g",
                (long long)m, (long long)n, (long long)d, kern, (long long)i, (long long)j, o64[at], w64);
          double x[2 * 4096], *y = x + 4096; // the float32 rows, widened
          for (int64_t k = 0; k < d; k++) x[k] = a32[i * lda + k], y[k] = b32[j * ldb + k];
          const double def32 = pd_def(kern, x, y, d), def64 = pd_def(kern, a64 + i * lda, b64 + j * ldb, d);
          if (f32) {
            const float w32 = pd_ref_f32(kern, a32 + i * lda, b32 + j * ldb, d);
            CHECK(memcmp(&o32[at], &w32, 4) == 0, "pairdist f32 %lld×%lld×%lld kernel %d: (%lld, %lld) is %.9g, want %.9g",
                  (long long)m, (long long)n, (long long)d, kern, (long long)i, (long long)j, o32[at], w32);
            e32 += (o32[at] - def32) * (o32[at] - def32);
          }
          e64 += (o64[at] - def64) * (o64[at] - def64), den += def64 * def64;
        }
      CHECK(!f32 || sqrt(e32 / den) < 1e-6, "pairdist f32 kernel %d: relative error %g", kern, sqrt(e32 / den));
      CHECK(sqrt(e64 / den) < 1e-14, "pairdist f64 kernel %d: relative error %g", kern, sqrt(e64 / den));
    }
    free(a32), free(b32), free(o32), free(a64), free(b64), free(o64);
  }
  // Blocks at odd offsets agree with the whole, bit for bit.
  const int64_t m = 29, n = 277, d = 1077;
  float *a = randf(m * d), *b = randf(n * d), *whole = malloc(sizeof(float) * m * n), *parts = malloc(sizeof(float) * m * n);
  for (int kern = TL_PAIR_L1; kern <= TL_PAIR_L2; kern++) {
    tl_pairdist_f32_neon(m, n, d, a, d, b, d, whole, n, kern);
    static const int64_t rows[] = {0, 5, 18, 29}, cols[] = {0, 33, 200, 277};
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 3; c++)
        tl_pairdist_f32_neon(rows[r + 1] - rows[r], cols[c + 1] - cols[c], d, a + rows[r] * d, d, b + cols[c] * d, d,
                             parts + rows[r] * n + cols[c], n, kern);
    CHECK(memcmp(whole, parts, sizeof(float) * m * n) == 0, "pairdist kernel %d: blocks differ from the whole", kern);
  }
  free(a), free(b), free(whole), free(parts);
}

static void test_u8(void) {
  const int top = tl_pair_u8_neon_limit(2);
  printf("8-bit kernels: level %d (%s) on this CPU\n", top, top == 2 ? "UDOT" : "plain NEON");
  test_u8_sums();
  for (int lvl = top; lvl >= 1; lvl--) test_u8_pairs(lvl);
  tl_pair_u8_neon_limit(0);
  int64_t s[1], q[1];
  const uint8_t one = 1;
  CHECK(tl_u8_sums_neon(&one, 1, 1, s, q) == -1, "level 0: u8 sums ran");
  tl_pair_u8_neon_limit(top);
}
#endif

int main(void) {
  if (!tl_gemm_ok()) {
    printf("the packed matrix product does not run on this CPU\n");
#if defined(__aarch64__)
    return 1;
#endif
  } else {
    test_gemm_tile(0);
    test_gemm_tile(1);
    test_gemm_nt();
    test_gemm_mirror();
    tl_fma_loop(1000);
  }
#if defined(__aarch64__)
  test_pairdist();
  test_u8();
#endif
  if (failures) {
    printf("FAIL: %d checks failed\n", failures);
    return 1;
  }
  printf("ok: the NEON kernels agree with the reference loops\n");
  return 0;
}
