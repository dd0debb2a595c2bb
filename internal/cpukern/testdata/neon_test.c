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

// test_gemm_tile: tl_gemm_tile on a pack filled in two calls gives every
// pair on or above the shifted diagonal dot_ref's value bit for bit, and
// writes nothing else (sentinels around and below); with tails in the
// rows, the columns and the k slices, and diagonals that cut tiles.
static void test_gemm_tile(void) {
  static const int64_t sz[][4] = {{1, 1, 1, -1},    {15, 33, 7, -1},   {29, 256, 385, -1}, {70, 31, 1000, -1},
                                  {8, 12, 384, -1}, {29, 45, 777, 0},  {37, 64, 300, 5},   {101, 200, 400, 33},
                                  {9, 20, 385, 100}, {64, 64, 64, 0}, {3, TL_GEMM_NC, 17, 0}, {17, TL_GEMM_NC - 1, 769, 7}};
  for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
    const int64_t m = sz[s][0], n = sz[s][1], d = sz[s][2], lower = sz[s][3];
    const int64_t lda = d + 3, ldb = d + 1, ldo = n + 5, am = (m + 7 + TL_GEMM_MR - 1) / TL_GEMM_MR * TL_GEMM_MR; // room for more rows
    float *a = randf(m * lda), *b = randf(n * ldb);
    float *ap = aligned(am * d), *bp = aligned((TL_GEMM_NC + TL_GEMM_NR - 1) / TL_GEMM_NR * TL_GEMM_NR * TL_GEMM_KC);
    float *out = malloc(sizeof(float) * (m * ldo + 5));
    const float sentinel = 12345;
    for (int64_t i = 0; i < m * ldo + 5; i++) out[i] = sentinel;
    const int64_t panels = (m + TL_GEMM_MR - 1) / TL_GEMM_MR;
    CHECK(tl_gemm_pack_a(m, d, a, lda, 0, 1, ap) == 0, "pack_a failed");
    CHECK(tl_gemm_pack_a(m, d, a, lda, 1, panels, ap) == 0, "pack_a failed");
    CHECK(tl_gemm_tile(m, m, d, ap, b, ldb, n, bp, out, ldo, lower) == 0, "tile failed");
    double e2 = 0, w2 = 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ldo; j++) {
        const float g = out[i * ldo + j];
        if (j >= n || (lower >= 0 && j + lower < i)) {
          CHECK(g == sentinel, "tile %lld×%lld×%lld lower %lld: (%lld, %lld) outside the pairs written: %g", (long long)m,
                (long long)n, (long long)d, (long long)lower, (long long)i, (long long)j, g);
          continue;
        }
        const float want = dot_ref(a + i * lda, b + j * ldb, d);
        CHECK(memcmp(&g, &want, 4) == 0, "tile %lld×%lld×%lld lower %lld: pair (%lld, %lld) is %.9g, want %.9g",
              (long long)m, (long long)n, (long long)d, (long long)lower, (long long)i, (long long)j, g, want);
        const double r = dot64(a + i * lda, b + j * ldb, d);
        e2 += (g - r) * (g - r), w2 += r * r;
      }
    CHECK(sqrt(e2 / w2) < 1e-6, "tile %lld×%lld×%lld: relative error %g against float64", (long long)m, (long long)n,
          (long long)d, sqrt(e2 / w2));
    CHECK(out[m * ldo] == sentinel, "guard after the last row written");
    free(a), free(b), free(ap), free(bp), free(out);
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

int main(void) {
  if (!tl_gemm_ok()) {
    printf("the packed matrix product does not run on this CPU\n");
#if defined(__aarch64__)
    return 1;
#endif
  } else {
    test_gemm_tile();
    test_gemm_nt();
    test_gemm_mirror();
    tl_fma_loop(1000);
  }
  if (failures) {
    printf("FAIL: %d checks failed\n", failures);
    return 1;
  }
  printf("ok: the NEON kernels agree with the reference loops\n");
  return 0;
}
