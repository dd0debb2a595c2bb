// What the 8-bit pairwise kernels do with a pair's exact sum, shared by
// pairu8.c and pairu8_neon.c (static inline: each includes it once).
#ifndef TAPELOOP_PAIRU8_PUT_H
#define TAPELOOP_PAIRU8_PUT_H
#include <math.h>
#include <stdint.h>

#include "pairu8.h"

// dst_t is where a call's results go: out[i*ldo + j] for every pair,
// and tout[j*ldo + i] too for the columns j ≥ tj (tout not NULL), in the
// output type; sum adds up every integer value stored (twice where it is
// stored twice).
typedef struct {
  void *out, *tout;
  int64_t ldo, tj;
  int type;
  __int128 sum;
} dst_t;

// value is the metric of a pair from its exact sum s (Σa·b, or Σ|a−b| for
// l1) and the rows' Σx², sa and sb: exact in int64 for the integer
// metrics.
static inline int64_t value(int metric, int64_t s, int64_t sa, int64_t sb) {
  switch (metric) {
  case TL_U8_L1: return -s;
  case TL_U8_L2: return -(sa + sb - 2 * s);
  default: return s;
  }
}

// store puts the integer value v, or the double c for cosine, at [k] of
// out in the output type: an integer value is exact in double (|v| < 2⁵³),
// so a float is the exact value correctly rounded.
static inline void store(int type, void *out, int64_t k, int64_t v, double c, int cosine) {
  switch (type) {
  case TL_OUT_F32: ((float *)out)[k] = cosine ? (float)c : (float)(double)v; break;
  case TL_OUT_F64: ((double *)out)[k] = cosine ? c : (double)v; break;
  case TL_OUT_I32: ((int32_t *)out)[k] = (int32_t)v; break;
  default: ((int64_t *)out)[k] = v;
  }
}

// put stores the metric of pair (i, j) from its exact sum s, and its
// transpose where dst asks for it.
static inline void put(int metric, int64_t s, int64_t sa, int64_t sb, dst_t *o, int64_t i, int64_t j) {
  const int cosine = metric == TL_U8_COSINE;
  const int64_t v = cosine ? 0 : value(metric, s, sa, sb);
  const double c = cosine ? (double)s / (sqrt((double)sa) * sqrt((double)sb)) : 0;
  store(o->type, o->out, i * o->ldo + j, v, c, cosine);
  o->sum += v;
  if (o->tout && j >= o->tj) {
    store(o->type, o->tout, j * o->ldo + i, v, c, cosine);
    o->sum += v;
  }
}

#endif
