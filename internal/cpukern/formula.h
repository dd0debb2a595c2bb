// The vectorised evaluator of users' formulas, see formula.c.
#ifndef TAPELOOP_FORMULA_H
#define TAPELOOP_FORMULA_H
#include <stdint.h>

// The instruction set: the formula operations' (formula_ops.h, NEG …
// RMIN), then the evaluator's own. Elementwise operations (NEG … WHERE,
// ABSDIFF, SQDIFF) read vector slots a, b, c and write slot dst in a
// vector block, or read and write scalar registers in a scalar block. In
// a vector block's prologue, BCAST fills slot dst with register a and
// RINIT_* start register dst for a reduction; in its body RSUM, RMAX and
// RMIN fold slot a into register dst and STORE writes slot a to output
// dst.
#include "formula_ops.h"
enum {
  TL_FX_ABSDIFF = TL_FX_OPS_END, // |a − b|
  TL_FX_SQDIFF,                  // (a − b)²
  TL_FX_RSUMOP, // fold op c (an operation that folds, ABSDIFF, SQDIFF) of slots a and b into register dst
  // In a scalar block: the next instruction runs bin by bin, over dst
  // registers in a row from each of its operands whose bit is set in a
  // (1: a, 2: b, 4: c; the others are one register), and dst. A reduction
  // so prefixed folds the registers a … a+dst-1 into its register dst.
  TL_FX_BINS,
  TL_FX_BCAST = 64, TL_FX_RINIT_SUM, TL_FX_RINIT_MAX, TL_FX_RINIT_MIN, TL_FX_STORE,
  TL_FX_RINIT_HIST // zero the a registers from dst on
};
// HIST and HIST2 (formula_ops.h), in a vector block's body: count the
// elements of slot a (HIST), or the pairs of slots a and b (HIST2), in
// the registers from dst on; registers c, c+1, c+2 hold the range lo, hi
// and the bins per axis n (n registers, or n² row by row for HIST2). As
// NumPy's histogram: n equal bins over [lo, hi], the last closed at hi,
// elements outside (and NaN) not counted.

typedef struct {
  int32_t op, dst, a, b, c;
} tl_fx_ins;

// A program: blocks of instructions, each scalar (run once) or vector (a
// prologue run once, then a body run over the vector axis in chunks of
// TL_FX_CHUNK elements). Vector slots 0 … nin-1 are the inputs.
typedef struct {
  int32_t nblocks;
  const int32_t *blocks; // per block: vector (0/1), prologue start, end, body start, end
  const tl_fx_ins *ins;
  int32_t nin, nslot, nreg;
  int32_t result; // the register holding a reducing program's result
} tl_fx_prog;

// The chunk length, in elements; a scratch buffer holds nslot chunks.
#define TL_FX_CHUNK 512

// tl_fx_run_*: runs p over n elements of the inputs in[k], writing the
// outputs out[k]; s holds the registers (inputs and constants set). An
// input k < 64 with bit k of bcast set is one value, in[k][0], for every
// element.
void tl_fx_run_f32(const tl_fx_prog *p, int64_t n, const float *const *in, float *const *out, double *s,
                   float *scratch, uint64_t bcast);
void tl_fx_run_f64(const tl_fx_prog *p, int64_t n, const double *const *in, double *const *out, double *s,
                   double *scratch, uint64_t bcast);

// tl_fx_stream_*: a reducing program over a vector given in pieces: for
// each block bi in order, tl_fx_stream_begin, then for a vector block
// tl_fx_stream_feed with every piece in order.
void tl_fx_stream_begin_f32(const tl_fx_prog *p, int32_t bi, double *s, float *scratch);
void tl_fx_stream_feed_f32(const tl_fx_prog *p, int32_t bi, int64_t n, const float *const *in, double *s,
                           float *scratch);
void tl_fx_stream_begin_f64(const tl_fx_prog *p, int32_t bi, double *s, double *scratch);
void tl_fx_stream_feed_f64(const tl_fx_prog *p, int32_t bi, int64_t n, const double *const *in, double *s,
                           double *scratch);

// tl_fx_pairs_*: out[i*ldo + j] = p(a row i, b row j) over d elements, for
// i < m, j < n; registers 0 … nr-1 hold ra[i*nr …] and nr … 2nr-1 hold
// rb[j*nr …] (the rows' precomputed values); s holds the others.
void tl_fx_pairs_f32(const tl_fx_prog *p, int64_t m, int64_t n, int64_t d, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *out, int64_t ldo, const double *ra,
                     const double *rb, int64_t nr, double *s, float *scratch);
void tl_fx_pairs_f64(const tl_fx_prog *p, int64_t m, int64_t n, int64_t d, const double *a, int64_t lda,
                     const double *b, int64_t ldb, double *out, int64_t ldo, const double *ra,
                     const double *rb, int64_t nr, double *s, double *scratch);

// tl_fx_interp_*: for each query q < nq, v = the m values
// sum_k w[4q+k] * fpT[(start[q]+k)*m …], register 0 = x[q], and
// out[q] = p(v); vbuf holds m values rounded up to a chunk.
void tl_fx_interp_f32(const tl_fx_prog *p, int64_t nq, int64_t m, const int32_t *start, const double *w,
                      const float *fpT, const float *x, float *out, double *s, float *vbuf, float *scratch);
void tl_fx_interp_f64(const tl_fx_prog *p, int64_t nq, int64_t m, const int32_t *start, const double *w,
                      const double *fpT, const double *x, double *out, double *s, double *vbuf,
                      double *scratch);
#endif
