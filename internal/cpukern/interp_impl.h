// The kernels of interp.c for one instruction set and one element type:
// interp.c includes this file once per pair (through interp_types.h),
// with the set's target pragma in force and the names below defined, and
// interp_undef.h after each set.
//
// T is the element type of the queries, outputs and value table (float or
// double), TS its tag (f32, f64), IT the integer of its size; SFX(name)
// names this pair's copy. The queries are placed WD at a time in double
// vectors VD (index vectors VX): D_SET1, D_MIN and D_MAX (the second
// operand where the first is NaN or the two are equal, as MINPD and MAXPD),
// D_FLOOR, D_FMA(a, b, c) (a*b + c), D_DIV(r, d, rd) (r/d correctly
// rounded, rd = 1/d correctly rounded), D_INDEX (an integer-valued VD in
// [0, 2^52) to a VX), D_STORE_INDEX(int64_t *, VX), D_LOAD_<TS>,
// D_STORE_<TS> (WD elements of type T, widened or narrowed); D_GRAM(p,
// off, e) sets e[k], k < 10, to p[off[l] + k] in lane l, D_COLS(p, off, c)
// c[k], k < 4, the same (loads and shuffles, not gathers). The value
// table is read along M in vectors of VB bytes, GCC vector types of T;
// STREAM_<TS>(p, v) stores one with a non-temporal store at a 64-byte
// aligned p, MSTORE_HI_<TS>(p, v, k) its last k lanes (0 < k < lanes),
// ACC_<TS>(v, sumsq, lo, hi) adds its lanes (or their squares) in double
// to the VDs lo and hi, nt_copy_<TS> copies with non-temporal stores, and
// STREAM_FENCE() orders those stores before what follows.

#define WT ((int)(VB / sizeof(T)))
#define LINE ((int)(64 / sizeof(T)))
#define D_LOADT CAT2(D_LOAD, TS)
#define D_STORET CAT2(D_STORE, TS)
#define STREAMT CAT2(STREAM, TS)
#define NT_COPYT CAT2(nt_copy, TS)
#define MSTORE_HIT CAT2(MSTORE_HI, TS)
#define ACCT CAT2(ACC, TS)

typedef T SFX(vt) __attribute__((vector_size(VB)));
typedef IT SFX(vi) __attribute__((vector_size(VB)));

// cell places WD queries x: it returns their starts s (integers, as
// doubles) and sets their weights w. The weights are evaluated as
// w_0,3 = (a_0 + c_0 t²) ± t (b_0 + d_0 t²) and w_1,2 likewise (the
// polynomials of w_3 and w_2 are those of w_0 and w_1 at -t), which at
// t = ±1/2, the grid points, gives the weights 0 and 1 exactly.
static inline __attribute__((always_inline)) VD SFX(cell)(VD x, const tl_grid *g, VD w[4]) {
  const VD a = D_SET1(g->a);
  x = D_MIN(D_SET1(g->ub), D_MAX(a, x));
  const VD u = D_DIV(x - a, D_SET1(g->dx), D_SET1(g->rdx));
  const VD fi = D_FLOOR(u);
  const VD t = u - (fi + D_SET1(0.5)), t2 = t * t;
  const VD e0 = D_FMA(t2, D_SET1(cub_c[0]), D_SET1(cub_a[0])), o0 = D_FMA(t2, D_SET1(cub_d[0]), D_SET1(cub_b[0]));
  const VD e1 = D_FMA(t2, D_SET1(cub_c[1]), D_SET1(cub_a[1])), o1 = D_FMA(t2, D_SET1(cub_d[1]), D_SET1(cub_b[1]));
  w[0] = D_FMA(t, o0, e0), w[3] = D_FMA(-t, o0, e0);
  w[1] = D_FMA(t, o1, e1), w[2] = D_FMA(-t, o1, e1);
  return D_MIN(D_MAX(fi, D_SET1(0)), D_SET1(g->gm2));
}

// load_x reads queries x[0 … n-1] (n ≤ WD) into a vector, the missing
// lanes at a.
static inline __attribute__((always_inline)) VD SFX(load_x)(const T *x, int64_t n, const tl_grid *g) {
  if (n >= WD) return D_LOADT(x);
  T b[WD];
  for (int l = 0; l < WD; l++) b[l] = l < n ? x[l] : (T)g->a;
  return D_LOADT(b);
}

// store_out writes the first n lanes (n ≤ WD) of v to out.
static inline __attribute__((always_inline)) void SFX(store_out)(T *out, int64_t n, VD v) {
  if (n >= WD) {
    D_STORET(out, v);
    return;
  }
  T b[WD];
  D_STORET(b, v);
  for (int l = 0; l < n; l++) out[l] = b[l];
}

// place places n ≤ QB queries: it sets off[i] to scale times the start of
// query i, and w[k][i] to its weight k. The kernels place a block of
// queries and then read the tables for it: with each vector's starts taken
// to scalar registers at once, the chain from a query to its table's
// entries held up the vector units (a third of the Gram kernel's time).
static void SFX(place)(int64_t n, const T *x, const tl_grid *g, double scale, int64_t off[QB], double w[4][QB]) {
  for (int64_t i = 0; i < n; i += WD) {
    VD wv[4];
    D_STORE_INDEX(off + i, D_INDEX(SFX(cell)(SFX(load_x)(x + i, n - i, g), g, wv) * D_SET1(scale)));
    for (int k = 0; k < 4; k++) D_STORE_f64(w[k] + i, wv[k]);
  }
}

// gram and colsum: tl_interp_gram and tl_interp_colsum (interp.h).
static void SFX(gram)(int64_t n, const T *x, T *out, const tl_grid *g, const double *gram) {
  int64_t off[QB] __attribute__((aligned(64)));
  double w[4][QB] __attribute__((aligned(64)));
  for (int64_t q0 = 0; q0 < n; q0 += QB) {
    const int64_t nb = n - q0 < QB ? n - q0 : QB;
    SFX(place)(nb, x + q0, g, 10, off, w);
    for (int64_t i = 0; i < nb; i += WD) {
      VD e[10];
      D_GRAM(gram, off + i, e);
      const VD w0 = D_LOAD_f64(w[0] + i), w1 = D_LOAD_f64(w[1] + i), w2 = D_LOAD_f64(w[2] + i);
      const VD w3 = D_LOAD_f64(w[3] + i);
      const VD d = w0 * w0 * e[0] + w1 * w1 * e[4] + w2 * w2 * e[7] + w3 * w3 * e[9];
      const VD o = w0 * (w1 * e[1] + w2 * e[2] + w3 * e[3]) + w1 * (w2 * e[5] + w3 * e[6]) + w2 * w3 * e[8];
      SFX(store_out)(out + q0 + i, nb - i, d + D_SET1(2) * o);
    }
  }
}

static void SFX(colsum)(int64_t n, const T *x, T *out, const tl_grid *g, const double *colsum) {
  int64_t off[QB] __attribute__((aligned(64)));
  double w[4][QB] __attribute__((aligned(64)));
  for (int64_t q0 = 0; q0 < n; q0 += QB) {
    const int64_t nb = n - q0 < QB ? n - q0 : QB;
    SFX(place)(nb, x + q0, g, 1, off, w);
    for (int64_t i = 0; i < nb; i += WD) {
      VD c[4];
      D_COLS(colsum, off + i, c);
      const VD v = D_LOAD_f64(w[0] + i) * c[0] + D_LOAD_f64(w[1] + i) * c[1] + D_LOAD_f64(w[2] + i) * c[2] +
                   D_LOAD_f64(w[3] + i) * c[3];
      SFX(store_out)(out + q0 + i, nb - i, v);
    }
  }
}

static inline __attribute__((always_inline)) SFX(vt) SFX(ld)(const T *p) {
  SFX(vt) v;
  memcpy(&v, p, sizeof(v));
  return v;
}

// mix is the vector of values j … j+WT-1 of a query whose rows are r[0],
// r[m], r[2m], r[3m], weights w0 … w3.
static inline __attribute__((always_inline)) SFX(vt) SFX(mix)(const T *r, int64_t m, int64_t j, T w0, T w1, T w2,
                                                              T w3) {
  return w0 * SFX(ld)(r + j) + w1 * SFX(ld)(r + m + j) + w2 * SFX(ld)(r + 2 * m + j) + w3 * SFX(ld)(r + 3 * m + j);
}

// row writes the m values of a query to p (m ≥ WT). With stream (m ≥
// 2*LINE) every store is non-temporal: whole 64-byte lines in vectors, the
// partial lines at either end, which the neighbouring rows share, in
// smaller pieces (nt_copy). An ordinary store there would read the line
// from memory first, and hold up all the stores after it until it came:
// the rows are not written in order when the queries are sorted.
static inline __attribute__((always_inline)) void SFX(row)(T *p, const T *r, int64_t m, T w0, T w1, T w2, T w3,
                                                           int stream) {
  int64_t j = 0;
  if (stream) {
    T b[LINE] __attribute__((aligned(64)));
    const int64_t h = (int64_t)((-(uintptr_t)p) & 63) / (int64_t)sizeof(T);
    if (h > 0) {
      for (int k = 0; k < LINE; k += WT) {
        const SFX(vt) v = SFX(mix)(r, m, k, w0, w1, w2, w3);
        memcpy(b + k, &v, sizeof(v));
      }
      NT_COPYT(p, b, h);
    }
    for (j = h; j + LINE <= m; j += LINE)
      for (int k = 0; k < LINE; k += WT) STREAMT(p + j + k, SFX(mix)(r, m, j + k, w0, w1, w2, w3));
    if (j < m) {
      for (int k = 0; k < LINE; k += WT) {
        const SFX(vt) v = SFX(mix)(r, m, m - LINE + k, w0, w1, w2, w3);
        memcpy(b + k, &v, sizeof(v));
      }
      NT_COPYT(p + j, b + LINE - (m - j), m - j);
    }
    return;
  }
  for (; j + WT <= m; j += WT) {
    const SFX(vt) v = SFX(mix)(r, m, j, w0, w1, w2, w3);
    memcpy(p + j, &v, sizeof(v));
  }
  if (j < m) MSTORE_HIT(p + m - WT, SFX(mix)(r, m, m - WT, w0, w1, w2, w3), m - j);
}

// sum_row is Σ_j v_j² (sumsq) or Σ_j v_j over a query's values, in double,
// lane-wise (m ≥ WT).
static inline __attribute__((always_inline)) double SFX(sum_row)(const T *r, int64_t m, T w0, T w1, T w2, T w3,
                                                                 int sumsq) {
  VD lo = D_SET1(0), hi = D_SET1(0);
  int64_t j = 0;
  for (; j + WT <= m; j += WT) ACCT(SFX(mix)(r, m, j, w0, w1, w2, w3), sumsq, lo, hi);
  if (j < m) {
    // The last WT values, less the lanes summed already.
    SFX(vi) lane;
    for (int l = 0; l < WT; l++) lane[l] = l;
    const SFX(vi) keep = lane >= (IT)(WT - (m - j));
    ACCT((SFX(vt))((SFX(vi))SFX(mix)(r, m, m - WT, w0, w1, w2, w3) & keep), sumsq, lo, hi);
  }
  // The lanes in a tree: a short chain of additions.
  double b[WD] __attribute__((aligned(64)));
  D_STORE_f64(b, lo + hi);
  for (int h = WD / 2; h > 0; h /= 2)
    for (int l = 0; l < h; l++) b[l] += b[l + h];
  return b[0];
}

// order sorts the n ≤ NB queries x by their starts, shifted right by
// o->shift, into o->perm: a counting sort over o->nbk buckets.
static void SFX(order)(int64_t n, const T *x, const tl_grid *g, tl_order *o) {
  int64_t s[QB] __attribute__((aligned(64)));
  double w[4][QB] __attribute__((aligned(64)));
  for (int64_t q0 = 0; q0 < n; q0 += QB) {
    const int64_t nb = n - q0 < QB ? n - q0 : QB;
    SFX(place)(nb, x + q0, g, 1, s, w);
    for (int64_t i = 0; i < nb; i++) o->key[q0 + i] = (int32_t)(s[i] >> o->shift);
  }
  memset(o->count, 0, sizeof(int32_t) * (o->nbk + 1));
  for (int64_t i = 0; i < n; i++) o->count[o->key[i] + 1]++;
  for (int64_t k = 0; k < o->nbk; k++) o->count[k + 1] += o->count[k];
  for (int64_t i = 0; i < n; i++) o->perm[o->count[o->key[i]]++] = (int32_t)i;
}

// direct evaluates the m values of each query from the (G+2, m) table fpT
// and writes them (mode VALUES, streamed when stream) or their sum of
// squares (SUMSQ) or sum (SUM). With o, it takes the queries NB at a time
// in the order of their starts, so that queries in one cell share their
// rows of fpT in the caches.
static void SFX(direct)(int64_t n, const T *x, T *out, const tl_grid *g, const T *fpT, int64_t m, int mode,
                        int stream, tl_order *o) {
  int64_t s[QB] __attribute__((aligned(64)));
  double w[4][QB] __attribute__((aligned(64)));
  T xs[QB];
  int64_t qs[QB];
  stream = stream && mode == VALUES && m >= 2 * LINE;
  for (int64_t b0 = 0; b0 < n; b0 += NB) {
    const int64_t nb = n - b0 < NB ? n - b0 : NB;
    if (o) SFX(order)(nb, x + b0, g, o);
    for (int64_t q0 = 0; q0 < nb; q0 += QB) {
      const int64_t nq = nb - q0 < QB ? nb - q0 : QB;
      for (int64_t i = 0; i < nq; i++) {
        qs[i] = b0 + (o ? o->perm[q0 + i] : q0 + i);
        xs[i] = x[qs[i]];
      }
      SFX(place)(nq, xs, g, 1, s, w);
      for (int64_t i = 0; i < nq; i++) {
        const T *r = fpT + s[i] * m;
        const T w0 = (T)w[0][i], w1 = (T)w[1][i], w2 = (T)w[2][i], w3 = (T)w[3][i];
        if (mode == VALUES) {
          T *p = out + qs[i] * m;
          if (m >= WT) {
            SFX(row)(p, r, m, w0, w1, w2, w3, stream);
          } else {
            for (int64_t j = 0; j < m; j++) p[j] = w0 * r[j] + w1 * r[m + j] + w2 * r[2 * m + j] + w3 * r[3 * m + j];
          }
          continue;
        }
        double acc = 0;
        if (m >= WT) {
          acc = mode == SUMSQ ? SFX(sum_row)(r, m, w0, w1, w2, w3, 1) : SFX(sum_row)(r, m, w0, w1, w2, w3, 0);
        } else {
          for (int64_t j = 0; j < m; j++) {
            const double v = (double)(w0 * r[j] + w1 * r[m + j] + w2 * r[2 * m + j] + w3 * r[3 * m + j]);
            acc += mode == SUMSQ ? v * v : v;
          }
        }
        out[qs[i]] = (T)acc;
      }
    }
  }
  if (stream) STREAM_FENCE();
}

#undef WT
#undef LINE
#undef D_LOADT
#undef D_STORET
#undef STREAMT
#undef NT_COPYT
#undef MSTORE_HIT
#undef ACCT
