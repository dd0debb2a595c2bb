// Separable 2-D filters: a row pass and a column pass, each a correlation
// with a 1-D kernel of taps, over a batch of float32 images.
//
// Both passes vectorise along the image's rows, which are contiguous: the
// row pass adds w[k] times the line shifted by k into the output line, tap
// after tap, for the pixels whose whole window lies inside the line (the
// edges, where the boundary extends the line, are summed pixel by pixel in
// the same order); the column pass adds w[k] times input row ext(r + k − h)
// into output row r. Every pixel is summed in float in the order of its
// taps from w[0]·x, so the result does not depend on the vector width
// beyond the fused multiply-adds of the AVX paths (and of arm64, whose
// compiler fuses them too). The bodies are written once and compiled for
// AVX-512, AVX2 (with FMA) and baseline SSE2 on x86-64, where
// tl_cpu_isa() picks, and for the baseline alone elsewhere.
#include "filter.h"
#include "isa.h"
#include "pairdist.h"

// ext is the index of the line of n values that position i stands for.
static inline int64_t ext(int64_t i, int64_t n, int mode) {
  if (i >= 0 && i < n) return i;
  if (mode == TL_FILTER_NEAREST) return i < 0 ? 0 : n - 1;
  int64_t m = i % (2 * n);
  if (m < 0) m += 2 * n;
  return m >= n ? 2 * n - 1 - m : m;
}

static inline __attribute__((always_inline)) void rows_body(const float *restrict in, float *restrict out, int64_t n,
                                                            int64_t lo, int64_t hi, const float *restrict w,
                                                            int64_t nw, int64_t h, int mode) {
  // The pixels c in [c0, c1) read only x[c − h … c − h + nw − 1], inside.
  int64_t c0 = h < n ? h : n, c1 = n - (nw - 1 - h);
  if (c1 < c0) c1 = c0;
  for (int64_t l = lo; l < hi; l++) {
    const float *restrict x = in + l * n;
    float *restrict o = out + l * n;
    for (int64_t c = 0; c < n; c++) {
      if (c == c0) c = c1;
      if (c >= n) break;
      float s = w[0] * x[ext(c - h, n, mode)];
      for (int64_t k = 1; k < nw; k++) s += w[k] * x[ext(c + k - h, n, mode)];
      o[c] = s;
    }
    if (c1 == c0) continue;
    const float w0 = w[0];
    for (int64_t c = c0; c < c1; c++) o[c] = w0 * x[c - h];
    for (int64_t k = 1; k < nw; k++) {
      const float wk = w[k];
      const float *restrict xk = x + k - h;
      for (int64_t c = c0; c < c1; c++) o[c] += wk * xk[c];
    }
  }
}

static inline __attribute__((always_inline)) void cols_body(const float *restrict in, float *restrict out,
                                                            int64_t rows, int64_t cols, int64_t lo, int64_t hi,
                                                            const float *restrict w, int64_t nw, int64_t h,
                                                            int mode) {
  for (int64_t g = lo; g < hi; g++) {
    const int64_t r = g % rows;
    const float *restrict img = in + (g - r) * cols;
    float *restrict o = out + g * cols;
    const float *restrict x = img + ext(r - h, rows, mode) * cols;
    const float w0 = w[0];
    for (int64_t c = 0; c < cols; c++) o[c] = w0 * x[c];
    for (int64_t k = 1; k < nw; k++) {
      const float wk = w[k];
      x = img + ext(r + k - h, rows, mode) * cols;
      for (int64_t c = 0; c < cols; c++) o[c] += wk * x[c];
    }
  }
}

#define ROWS_ARGS const float *in, float *out, int64_t n, int64_t lo, int64_t hi, const float *w, int64_t nw, int64_t h, int mode
#define COLS_ARGS                                                                                                   \
  const float *in, float *out, int64_t rows, int64_t cols, int64_t lo, int64_t hi, const float *w, int64_t nw,     \
      int64_t h, int mode

#if TL_X86
__attribute__((target("avx512f,avx512vl,avx2,fma"))) static void rows_512(ROWS_ARGS) {
  rows_body(in, out, n, lo, hi, w, nw, h, mode);
}
__attribute__((target("avx2,fma"))) static void rows_256(ROWS_ARGS) { rows_body(in, out, n, lo, hi, w, nw, h, mode); }
#endif
static void rows_128(ROWS_ARGS) { rows_body(in, out, n, lo, hi, w, nw, h, mode); }

#if TL_X86
__attribute__((target("avx512f,avx512vl,avx2,fma"))) static void cols_512(COLS_ARGS) {
  cols_body(in, out, rows, cols, lo, hi, w, nw, h, mode);
}
__attribute__((target("avx2,fma"))) static void cols_256(COLS_ARGS) {
  cols_body(in, out, rows, cols, lo, hi, w, nw, h, mode);
}
#endif
static void cols_128(COLS_ARGS) { cols_body(in, out, rows, cols, lo, hi, w, nw, h, mode); }

// The selectors of the two passes.
void tl_filter_rows_f32(ROWS_ARGS) {
  switch (tl_cpu_isa()) {
#if TL_X86
  case TL_ISA_AVX512: rows_512(in, out, n, lo, hi, w, nw, h, mode); break;
  case TL_ISA_AVX2: rows_256(in, out, n, lo, hi, w, nw, h, mode); break;
#endif
  default: rows_128(in, out, n, lo, hi, w, nw, h, mode);
  }
}

void tl_filter_cols_f32(COLS_ARGS) {
  switch (tl_cpu_isa()) {
#if TL_X86
  case TL_ISA_AVX512: cols_512(in, out, rows, cols, lo, hi, w, nw, h, mode); break;
  case TL_ISA_AVX2: cols_256(in, out, rows, cols, lo, hi, w, nw, h, mode); break;
#endif
  default: cols_128(in, out, rows, cols, lo, hi, w, nw, h, mode);
  }
}
