// The evaluator of formula.c for one element type and instruction set:
// formula.c includes this file once per pair, with the set's target pragma
// in force and these names defined: T the element type, IT its integer
// twin, W the lanes per vector, SFX(name) the pair's copy of a name, and
// FN(name) the libm function of T (expf or exp).

typedef T SFX(v) __attribute__((vector_size(W * sizeof(T)), aligned(sizeof(T))));
typedef IT SFX(vi) __attribute__((vector_size(W * sizeof(T)), aligned(sizeof(T))));
#define V SFX(v)
#define VI SFX(vi)

static inline V SFX(bits)(VI m, V x) { return (V)(m & (VI)x); }
static inline V SFX(select)(VI m, V x, V y) { return (V)((m & (VI)x) | (~m & (VI)y)); }

// hsum adds the lanes of v pairwise, halving the vector each step.
static inline T SFX(hsum)(V v) {
  T t[W];
  memcpy(t, &v, sizeof(t));
  for (int w = W / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) t[l] += t[l + w];
  return t[0];
}

// FOLD4(expr) sets acc to the sum of expr over k < full, in four
// accumulators (k, k+1, k+2, k+3 at once): one would wait on the latency
// of each addition.
#define FOLD4(expr)                                               \
  {                                                               \
    V f0 = zero, f1 = zero, f2 = zero, f3 = zero;                 \
    int64_t k = 0;                                                \
    for (; k + 4 <= full; k += 4) {                               \
      f0 += (expr);                                               \
      k++;                                                        \
      f1 += (expr);                                               \
      k++;                                                        \
      f2 += (expr);                                               \
      k++;                                                        \
      f3 += (expr);                                               \
      k -= 3;                                                     \
    }                                                             \
    for (; k < full; k++) f0 += (expr);                           \
    acc = (f0 + f1) + (f2 + f3);                                  \
  }

// accumulate adds a chunk's sum, its lanes acc and its tail t, to
// register r: at once (vacc NULL), or into the vector accumulator vacc[r],
// whose lanes go to the register when flush is set (every few chunks, so
// that a lane's float sum stays short).
static inline void SFX(accumulate)(double *s, V *vacc, int32_t r, V acc, T t, int flush) {
  if (!vacc) {
    s[r] += SFX(hsum)(acc) + t;
    return;
  }
  vacc[r] += acc;
  s[r] += t;
  if (flush) {
    s[r] += SFX(hsum)(vacc[r]);
    vacc[r] = (V){0};
  }
}

// body runs the instructions of a vector block's body over one chunk of nn
// elements (nv vectors; the slots' lanes past nn hold padding).
static void SFX(body)(const tl_fx_ins *ins, int32_t nins, T *const *ptr, int32_t nslot, int64_t nn, double *s,
                      T *const *out, int64_t off, V *vacc, int flush) {
  const int64_t nv = (nn + W - 1) / W, full = nn / W;
  const V one = (V){0} + (T)1, zero = (V){0};
  const VI absmask = (VI){0} + (IT)(~((IT)1 << (sizeof(IT) * 8 - 1)));
  for (int32_t q = 0; q < nins; q++) {
    const tl_fx_ins x = ins[q];
    // An operand that is not a slot (a register, a count, a flag: each
    // instruction says which are slots) is not read from ptr, which holds
    // nslot entries only.
#define SLOT(i) ((i) >= 0 && (i) < nslot ? ptr[i] : NULL)
    V *d = (V *)SLOT(x.dst);
    const V *u = (const V *)SLOT(x.a), *v = (const V *)SLOT(x.b), *c = (const V *)SLOT(x.c);
#undef SLOT
    T *ds = (T *)d;
    const T *us = (const T *)u, *vs = (const T *)v;
    switch (x.op) {
#define EACH(expr) for (int64_t k = 0; k < nv; k++) d[k] = (expr); break;
#define LANES(expr) for (int64_t k = 0; k < nv * W; k++) ds[k] = (expr); break;
    TL_FX_VECTOR_CASES
    case TL_FX_ABSDIFF: EACH((V)((VI)(u[k] - v[k]) & absmask))
    case TL_FX_SQDIFF: EACH((u[k] - v[k]) * (u[k] - v[k]))
#undef EACH
#undef LANES
    case TL_FX_RSUM: {
      V acc;
      FOLD4(u[k])
      T t = 0;
      for (int64_t k = full * W; k < nn; k++) t += us[k];
      SFX(accumulate)(s, vacc, x.dst, acc, t, flush);
      break;
    }
    case TL_FX_RSUMOP: {
      V acc = zero;
      switch (x.c) {
#define FOLD(expr) FOLD4(expr) break;
      TL_FX_FOLD_CASES
      case TL_FX_ABSDIFF: FOLD((V)((VI)(u[k] - v[k]) & absmask))
      case TL_FX_SQDIFF: FOLD((u[k] - v[k]) * (u[k] - v[k]))
#undef FOLD
      }
      T t = 0;
      for (int64_t k = full * W; k < nn; k++) t += (T)tl_fx_scalar(x.c, us[k], vs[k], 0);
      SFX(accumulate)(s, vacc, x.dst, acc, t, flush);
      break;
    }
    case TL_FX_RMAX:
    case TL_FX_RMIN: {
      // NaN elements are skipped (as NumPy's nanmax, and the GPU
      // kernels): every comparison with NaN is false.
      const int mx = x.op == TL_FX_RMAX;
      T t = mx ? -INFINITY : INFINITY;
      if (full > 0) {
        V acc = (V){0} + t;
        for (int64_t k = 0; k < full; k++)
          acc = mx ? SFX(select)(u[k] > acc, u[k], acc) : SFX(select)(u[k] < acc, u[k], acc);
        t = acc[0];
        for (int l = 1; l < W; l++) t = mx ? (acc[l] > t ? acc[l] : t) : (acc[l] < t ? acc[l] : t);
      }
      for (int64_t k = full * W; k < nn; k++) t = mx ? (us[k] > t ? us[k] : t) : (us[k] < t ? us[k] : t);
      if (mx ? t > s[x.dst] : t < s[x.dst]) s[x.dst] = t;
      break;
    }
    case TL_FX_HIST:
    case TL_FX_HIST2:
      tl_fx_hist(s, x, x.op == TL_FX_HIST2, nn, us, vs);
      break;
    case TL_FX_STORE:
      memcpy(out[x.dst] + off, us, nn * sizeof(T));
      break;
    }
  }
}

// scalars runs the scalar blocks among blocks [b0, b1) of p.
static void SFX(scalars)(const tl_fx_prog *p, int32_t b0, int32_t b1, double *s) {
  for (int32_t bi = b0; bi < b1; bi++) {
    const int32_t *bk = p->blocks + 5 * bi;
    if (bk[0]) continue;
    for (int32_t q = bk[3]; q < bk[4]; q++) {
      const tl_fx_ins x = p->ins[q];
      if (x.op == TL_FX_BINS) {
        tl_fx_bins(x, p->ins[++q], s);
        continue;
      }
      s[x.dst] = tl_fx_scalar(x.op, s[x.a], s[x.b], s[x.c]);
    }
  }
}

// prologue runs one instruction of a vector block's prologue.
static void SFX(prologue)(tl_fx_ins x, double *s, T *const *ptr) {
  switch (x.op) {
  case TL_FX_BCAST:
    for (int k = 0; k < TL_FX_CHUNK; k++) ptr[x.dst][k] = (T)s[x.a];
    break;
  case TL_FX_RINIT_SUM: s[x.dst] = 0; break;
  case TL_FX_RINIT_MAX: s[x.dst] = -INFINITY; break;
  case TL_FX_RINIT_MIN: s[x.dst] = INFINITY; break;
  case TL_FX_RINIT_HIST: memset(s + x.dst, 0, sizeof(double) * x.a); break;
  }
}

// feed runs the body of vector block bi over n elements of the inputs
// in[k], writing the outputs out[k] from element off on. An input k with
// bit k of bcast set is one value, in[k][0], the same for every element.
static void SFX(feed)(const tl_fx_prog *p, int32_t bi, int64_t n, const T *const *in, T *const *out, int64_t off0,
                      double *s, T *scratch, T **ptr, uint64_t bcast) {
  const int32_t *bk = p->blocks + 5 * bi;
  for (int32_t k = 0; k < p->nin && k < 64; k++)
    if (bcast >> k & 1) { // a whole chunk of it, read in place of the input's
      T *q = scratch + (int64_t)k * TL_FX_CHUNK;
      const T v = in[k][0];
      for (int j = 0; j < TL_FX_CHUNK; j++) q[j] = v;
    }
  for (int64_t off = 0; off < n; off += TL_FX_CHUNK) {
    int64_t nn = n - off < TL_FX_CHUNK ? n - off : TL_FX_CHUNK;
    for (int32_t k = 0; k < p->nin; k++) {
      if (k < 64 && bcast >> k & 1) {
        ptr[k] = scratch + (int64_t)k * TL_FX_CHUNK;
      } else if (nn == TL_FX_CHUNK) {
        ptr[k] = (T *)in[k] + off;
      } else { // the last, short chunk: a padded copy, so whole vectors can be read
        ptr[k] = scratch + (int64_t)k * TL_FX_CHUNK;
        memcpy(ptr[k], in[k] + off, nn * sizeof(T));
        memset(ptr[k] + nn, 0, (TL_FX_CHUNK - nn) * sizeof(T));
      }
    }
    SFX(body)(p->ins + bk[3], bk[4] - bk[3], ptr, p->nslot, nn, s, out, off0 + off, NULL, 1);
  }
}

// begin starts block bi: runs it if scalar, else its prologue.
static void SFX(begin)(const tl_fx_prog *p, int32_t bi, double *s, T **ptr) {
  const int32_t *bk = p->blocks + 5 * bi;
  if (!bk[0]) {
    SFX(scalars)(p, bi, bi + 1, s);
    return;
  }
  for (int32_t q = bk[1]; q < bk[2]; q++) SFX(prologue)(p->ins[q], s, ptr);
}

static void SFX(slots)(const tl_fx_prog *p, T *scratch, T **ptr) {
  for (int32_t k = 0; k < p->nslot; k++) ptr[k] = scratch + (int64_t)k * TL_FX_CHUNK;
}

void SFX(run)(const tl_fx_prog *p, int64_t n, const T *const *in, T *const *out, double *s, T *scratch,
              uint64_t bcast) {
  T *ptr[p->nslot > 0 ? p->nslot : 1];
  SFX(slots)(p, scratch, ptr);
  for (int32_t bi = 0; bi < p->nblocks; bi++) {
    SFX(begin)(p, bi, s, ptr);
    if (p->blocks[5 * bi]) SFX(feed)(p, bi, n, in, out, 0, s, scratch, ptr, bcast);
  }
}

void SFX(stream_begin)(const tl_fx_prog *p, int32_t bi, double *s, T *scratch) {
  T *ptr[p->nslot > 0 ? p->nslot : 1];
  SFX(slots)(p, scratch, ptr);
  SFX(begin)(p, bi, s, ptr);
}

void SFX(stream_feed)(const tl_fx_prog *p, int32_t bi, int64_t n, const T *const *in, double *s, T *scratch) {
  T *ptr[p->nslot > 0 ? p->nslot : 1];
  SFX(slots)(p, scratch, ptr);
  SFX(feed)(p, bi, n, in, NULL, 0, s, scratch, ptr, 0);
}

// pairs_tiled is pairs for a program with one vector block: a tile of
// TI rows by TJ columns goes through the vector axis together, chunk by
// chunk, each pair with registers of its own, so that a chunk of a column
// read from L2 serves TI rows and the rows' chunks stay in L1.
#define TI 4
#define TJ 16
static void SFX(pairs_tiled)(const tl_fx_prog *p, int vb, int64_t m, int64_t n, int64_t d, const T *a, int64_t lda,
                             const T *b, int64_t ldb, T *out, int64_t ldo, const double *ra, const double *rb,
                             int64_t nr, const double *s0, T *scratch) {
  const int32_t nreg = p->nreg;
  const int32_t *bk = p->blocks + 5 * vb;
  double *sp = (double *)malloc(sizeof(double) * TI * TJ * (nreg > 0 ? nreg : 1));
  V *vacc = (V *)aligned_alloc(64, sizeof(V) * TI * TJ * (nreg > 0 ? nreg : 1));
  T *ptr[p->nslot > 0 ? p->nslot : 1];
  for (int32_t k = 0; k < p->nslot; k++) ptr[k] = scratch + (int64_t)k * TL_FX_CHUNK;
  int bcast = 0;
  for (int32_t q = bk[1]; q < bk[2]; q++) bcast |= p->ins[q].op == TL_FX_BCAST;
  for (int64_t jb = 0; jb < n; jb += TJ) {
    const int64_t nj = n - jb < TJ ? n - jb : TJ;
    for (int64_t ib = 0; ib < m; ib += TI) {
      const int64_t ni = m - ib < TI ? m - ib : TI;
      for (int64_t jj = 0; jj < nj; jj++)
        for (int64_t ii = 0; ii < ni; ii++) {
          double *s = sp + (jj * TI + ii) * nreg;
          memcpy(s, s0, sizeof(double) * nreg);
          memset(vacc + (jj * TI + ii) * nreg, 0, sizeof(V) * nreg);
          for (int64_t r = 0; r < nr; r++) {
            s[r] = ra[(ib + ii) * nr + r];
            s[nr + r] = rb[(jb + jj) * nr + r];
          }
          SFX(scalars)(p, 0, vb, s);
          for (int32_t q = bk[1]; q < bk[2]; q++) SFX(prologue)(p->ins[q], s, ptr);
        }
      for (int64_t off = 0; off < d; off += TL_FX_CHUNK) {
        const int64_t nn = d - off < TL_FX_CHUNK ? d - off : TL_FX_CHUNK;
        for (int64_t jj = 0; jj < nj; jj++)
          for (int64_t ii = 0; ii < ni; ii++) {
            double *s = sp + (jj * TI + ii) * nreg;
            const T *in[2] = {a + (ib + ii) * lda + off, b + (jb + jj) * ldb + off};
            for (int k = 0; k < 2; k++) {
              if (nn == TL_FX_CHUNK) {
                ptr[k] = (T *)in[k];
              } else {
                ptr[k] = scratch + (int64_t)k * TL_FX_CHUNK;
                memcpy(ptr[k], in[k], nn * sizeof(T));
                memset(ptr[k] + nn, 0, (TL_FX_CHUNK - nn) * sizeof(T));
              }
            }
            if (bcast)
              for (int32_t q = bk[1]; q < bk[2]; q++)
                if (p->ins[q].op == TL_FX_BCAST) SFX(prologue)(p->ins[q], s, ptr);
            const int flush = (off / TL_FX_CHUNK) % 16 == 15 || off + TL_FX_CHUNK >= d;
            SFX(body)(p->ins + bk[3], bk[4] - bk[3], ptr, p->nslot, nn, s, NULL, off, vacc + (jj * TI + ii) * nreg, flush);
          }
      }
      for (int64_t jj = 0; jj < nj; jj++)
        for (int64_t ii = 0; ii < ni; ii++) {
          double *s = sp + (jj * TI + ii) * nreg;
          SFX(scalars)(p, vb + 1, p->nblocks, s);
          out[(ib + ii) * ldo + jb + jj] = (T)s[p->result];
        }
    }
  }
  free(sp);
  free(vacc);
}
#undef TI
#undef TJ

void SFX(pairs)(const tl_fx_prog *p, int64_t m, int64_t n, int64_t d, const T *a, int64_t lda, const T *b,
                int64_t ldb, T *out, int64_t ldo, const double *ra, const double *rb, int64_t nr, double *s,
                T *scratch) {
  int nvb = 0, vb = -1;
  for (int32_t bi = 0; bi < p->nblocks; bi++)
    if (p->blocks[5 * bi]) nvb++, vb = bi;
  // (Each pair of a tile has its registers: not for a program of many,
  // a histogram's.)
  if (nvb == 1 && p->nin == 2 && p->nreg <= 1024) {
    SFX(pairs_tiled)(p, vb, m, n, d, a, lda, b, ldb, out, ldo, ra, rb, nr, s, scratch);
    return;
  }
  // Columns in blocks whose rows stay in L2 while every row of a visits them.
  int64_t nb = (1 << 20) / (d * (int64_t)sizeof(T) + 1);
  nb = nb < 1 ? 1 : nb > 64 ? 64 : nb;
  for (int64_t jb = 0; jb < n; jb += nb) {
    int64_t je = jb + nb < n ? jb + nb : n;
    for (int64_t i = 0; i < m; i++) {
      for (int64_t r = 0; r < nr; r++) s[r] = ra[i * nr + r];
      for (int64_t j = jb; j < je; j++) {
        for (int64_t r = 0; r < nr; r++) s[nr + r] = rb[j * nr + r];
        const T *in[2] = {a + i * lda, b + j * ldb};
        SFX(run)(p, d, in, NULL, s, scratch, 0);
        out[i * ldo + j] = (T)s[p->result];
      }
    }
  }
}

void SFX(interp)(const tl_fx_prog *p, int64_t nq, int64_t m, const int32_t *start, const double *w,
                 const T *fpT, const T *x, T *out, double *s, T *vbuf, T *scratch) {
  for (int64_t q = 0; q < nq; q++) {
    const T *r0 = fpT + (int64_t)start[q] * m, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;
    const T w0 = (T)w[4 * q], w1 = (T)w[4 * q + 1], w2 = (T)w[4 * q + 2], w3 = (T)w[4 * q + 3];
    for (int64_t j = 0; j < m; j++) vbuf[j] = w0 * r0[j] + w1 * r1[j] + w2 * r2[j] + w3 * r3[j];
    s[0] = (double)x[q];
    const T *in[1] = {vbuf};
    SFX(run)(p, m, in, NULL, s, scratch, 0);
    out[q] = (T)s[p->result];
  }
}

#undef V
#undef VI
