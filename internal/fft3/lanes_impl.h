// The transforms of lanes.c for one instruction set: lanes.c includes this
// file once per set, with the set's target pragma in force and these
// names defined: SFX(name) for that set's copies, W lanes (2^LOGW) per
// vector VF, CV for W complex numbers (one per line) as a vector of real
// parts and one of imaginary parts, and the shuffle masks EVEN, ODD, LO,
// HI, TR0, TR1.

// scratch_cv is work buffer i (of three, n + 2 elements each) in the
// caller's scratch, aligned for whole-vector access.
AI CV *SFX(scratch_cv)(float *scratch, const tl_fft1 *f, int i) {
  CV *base = (CV *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
  const int n = f->real > f->n ? f->real : f->n;
  return base + (int64_t)i * (n + 2);
}

AI CV SFX(add)(CV a, CV b) { return (CV){a.re + b.re, a.im + b.im}; }
AI CV SFX(sub)(CV a, CV b) { return (CV){a.re - b.re, a.im - b.im}; }
AI CV SFX(mulw)(CV a, float wr, float wi) { return (CV){a.re * wr - a.im * wi, a.re * wi + a.im * wr}; }

// Each stage of the Stockham autosort FFT reads x and writes y: for the
// current length L = p·m and stride s, element q + s·(j + r·m) of x
// (r < p) enters the radix-p butterfly whose output t, times the twiddle
// e^(−2πi·j·t/L), goes to q + s·(p·j + t). The first loop (j = 0) has
// only unit twiddles.
AI void SFX(stage2)(int L, int s, const CV *x, CV *y, const float *tw) {
  const int m = L / 2;
  for (int j = 0; j < m; j++) {
    const float wr = tw[2 * j], wi = tw[2 * j + 1];
    for (int q = 0; q < s; q++) {
      const CV a0 = x[q + s * j], a1 = x[q + s * (j + m)];
      CV *b = y + q + 2 * s * j;
      b[0] = SFX(add)(a0, a1);
      b[s] = j ? SFX(mulw)(SFX(sub)(a0, a1), wr, wi) : SFX(sub)(a0, a1);
    }
  }
}

AI void SFX(stage4)(int L, int s, const CV *x, CV *y, const float *tw) {
  const int m = L / 4;
  const int64_t sm = (int64_t)s * m;
  for (int j = 0; j < m; j++) {
    const float *w = tw + 6 * j;
    for (int q = 0; q < s; q++) {
      const CV *a = x + q + (int64_t)s * j;
      CV *b = y + q + 4 * (int64_t)s * j;
      const CV t0 = SFX(add)(a[0], a[2 * sm]), t1 = SFX(sub)(a[0], a[2 * sm]);
      const CV t2 = SFX(add)(a[sm], a[3 * sm]), t3 = SFX(sub)(a[sm], a[3 * sm]);
      CV b1 = {t1.re + t3.im, t1.im - t3.re}, b3 = {t1.re - t3.im, t1.im + t3.re};
      CV b2 = SFX(sub)(t0, t2);
      b[0] = SFX(add)(t0, t2);
      if (j) {
        b1 = SFX(mulw)(b1, w[0], w[1]);
        b2 = SFX(mulw)(b2, w[2], w[3]);
        b3 = SFX(mulw)(b3, w[4], w[5]);
      }
      b[s] = b1;
      b[2 * s] = b2;
      b[3 * s] = b3;
    }
  }
}

// Radix 3 and 5 (p a constant once inlined): inputs paired as r and p − r,
// b_t = a0 + Σ cos(2πrt/p)(a_r + a_{p−r}) ∓ i Σ sin(2πrt/p)(a_r − a_{p−r}).
AI void SFX(stage_odd)(const int p, int L, int s, const CV *x, CV *y, const float *tw, const float *cs) {
  const int m = L / p, h = (p - 1) / 2;
  const int64_t sm = (int64_t)s * m;
  for (int j = 0; j < m; j++) {
    const float *w = tw + 2 * (p - 1) * j;
    for (int q = 0; q < s; q++) {
      const CV *a = x + q + (int64_t)s * j;
      CV *b = y + q + (int64_t)p * s * j;
      CV S[2], D[2], sum = a[0];
      for (int r = 1; r <= h; r++) {
        S[r - 1] = SFX(add)(a[r * sm], a[(p - r) * sm]);
        D[r - 1] = SFX(sub)(a[r * sm], a[(p - r) * sm]);
        sum = SFX(add)(sum, S[r - 1]);
      }
      b[0] = sum;
      for (int t = 1; t <= h; t++) {
        CV A = a[0], B = {(VF){0}, (VF){0}};
        for (int r = 1; r <= h; r++) {
          const int k = (r * t) % p;
          const float c = cs[2 * k], sn = cs[2 * k + 1];
          A.re += c * S[r - 1].re;
          A.im += c * S[r - 1].im;
          B.re += sn * D[r - 1].re;
          B.im += sn * D[r - 1].im;
        }
        CV bt = {A.re + B.im, A.im - B.re}, bp = {A.re - B.im, A.im + B.re};
        if (j) {
          bt = SFX(mulw)(bt, w[2 * (t - 1)], w[2 * (t - 1) + 1]);
          bp = SFX(mulw)(bp, w[2 * (p - t - 1)], w[2 * (p - t - 1) + 1]);
        }
        b[t * s] = bt;
        b[(p - t) * s] = bp;
      }
    }
  }
}

// Any other prime p: the butterfly as the DFT sum, p² terms.
static void SFX(stage_any)(int p, int L, int s, const CV *x, CV *y, const float *tw, const float *cs) {
  const int m = L / p;
  const int64_t sm = (int64_t)s * m;
  for (int j = 0; j < m; j++) {
    const float *w = tw + 2 * (p - 1) * j;
    for (int q = 0; q < s; q++) {
      const CV *a = x + q + (int64_t)s * j;
      CV *b = y + q + (int64_t)p * s * j;
      for (int t = 0; t < p; t++) {
        CV acc = a[0];
        int k = 0;
        for (int r = 1; r < p; r++) {
          k += t;
          if (k >= p) k -= p;
          const float c = cs[2 * k], sn = cs[2 * k + 1]; // a_r · e^(−2πik/p)
          const CV v = a[r * sm];
          acc.re += v.re * c + v.im * sn;
          acc.im += v.im * c - v.re * sn;
        }
        if (j && t) acc = SFX(mulw)(acc, w[2 * (t - 1)], w[2 * (t - 1) + 1]);
        b[(int64_t)t * s] = acc;
      }
    }
  }
}

// run transforms the lanes in x (f->n elements) using y as the other
// buffer; it returns whichever holds the result.
static CV *SFX(run)(const tl_fft1 *f, CV *x, CV *y) {
  int L = f->n, s = 1;
  for (int st = 0; st < f->nf; st++) {
    const int p = f->fac[st];
    const float *tw = f->tw + f->twoff[st], *cs = f->cs + f->csoff[st];
    switch (p) {
    case 2: SFX(stage2)(L, s, x, y, tw); break;
    case 3: SFX(stage_odd)(3, L, s, x, y, tw, cs); break;
    case 4: SFX(stage4)(L, s, x, y, tw); break;
    case 5: SFX(stage_odd)(5, L, s, x, y, tw, cs); break;
    default: SFX(stage_any)(p, L, s, x, y, tw, cs);
    }
    CV *t = x;
    x = y;
    y = t;
    L /= p;
    s *= p;
  }
  return x;
}

// swap exchanges real and imaginary parts: the inverse transform is
// swap ∘ forward ∘ swap.
AI void SFX(swap)(CV *x, int n) {
  for (int i = 0; i < n; i++) {
    const VF t = x[i].re;
    x[i].re = x[i].im;
    x[i].im = t;
  }
}

// Strided lines: element i of lane l at x[2(l + i·st)], re then im.
AI void SFX(load_strided)(const float *x, int64_t st, int n, int m, CV *buf) {
  for (int i = 0; i < n; i++) {
    const float *src = x + 2 * i * st;
    VF a, b;
    if (m == W) {
      memcpy(&a, src, sizeof a);
      memcpy(&b, src + W, sizeof b);
    } else {
      float t[2 * W] = {0};
      memcpy(t, src, 8 * (size_t)m);
      memcpy(&a, t, sizeof a);
      memcpy(&b, t + W, sizeof b);
    }
    buf[i].re = __builtin_shuffle(a, b, EVEN);
    buf[i].im = __builtin_shuffle(a, b, ODD);
  }
}

AI void SFX(store_strided)(float *x, int64_t st, int n, int m, const CV *buf, float scale) {
  for (int i = 0; i < n; i++) {
    float *dst = x + 2 * i * st;
    const VF re = buf[i].re * scale, im = buf[i].im * scale;
    const VF a = __builtin_shuffle(re, im, LO), b = __builtin_shuffle(re, im, HI);
    if (m == W) {
      memcpy(dst, &a, sizeof a);
      memcpy(dst + W, &b, sizeof b);
    } else {
      float t[2 * W];
      memcpy(t, &a, sizeof a);
      memcpy(t + W, &b, sizeof b);
      memcpy(dst, t, 8 * (size_t)m);
    }
  }
}

// transpose transposes the W×W matrix whose rows are r: round k
// exchanges bit k of the row and column indices.
AI void SFX(transpose)(VF r[W]) {
  for (int k = 0; k < LOGW; k++) {
    const int b = 1 << k;
    for (int i = 0; i < W; i++) {
      if (i & b) continue;
      const VF A = r[i], B = r[i | b];
      r[i] = __builtin_shuffle(A, B, TR0[k]);
      r[i | b] = __builtin_shuffle(A, B, TR1[k]);
    }
  }
}

// Contiguous lines: float f of line l at x[l·ldf + f]. load_rows puts
// float f of every line in dst[f] (lines from m on read as zero), nfl
// floats per line; store_rows does the reverse, times scale.
AI void SFX(load_rows)(const float *x, int64_t ldf, int nfl, int m, VF *dst) {
  int f0 = 0;
  for (; f0 + W <= nfl; f0 += W) {
    VF r[W];
    for (int l = 0; l < W; l++) {
      if (l < m)
        memcpy(&r[l], x + l * ldf + f0, sizeof r[l]);
      else
        r[l] = (VF){0};
    }
    SFX(transpose)(r);
    for (int c = 0; c < W; c++) dst[f0 + c] = r[c];
  }
  for (; f0 < nfl; f0++) {
    VF v = {0};
    for (int l = 0; l < m; l++) v[l] = x[l * ldf + f0];
    dst[f0] = v;
  }
}

AI void SFX(store_rows)(float *x, int64_t ldf, int nfl, int m, const VF *src, float scale) {
  int f0 = 0;
  for (; f0 + W <= nfl; f0 += W) {
    VF r[W];
    for (int c = 0; c < W; c++) r[c] = src[f0 + c] * scale;
    SFX(transpose)(r);
    for (int l = 0; l < m; l++) memcpy(x + l * ldf + f0, &r[l], sizeof r[l]);
  }
  for (; f0 < nfl; f0++) {
    const VF v = src[f0] * scale;
    for (int l = 0; l < m; l++) x[l * ldf + f0] = v[l];
  }
}

static void SFX(strided)(const tl_fft1 *f, float *x, int64_t base, int64_t lanes, int64_t st, int inverse, float scale,
                         float *scratch) {
  CV *buf = SFX(scratch_cv)(scratch, f, 0), *tmp = SFX(scratch_cv)(scratch, f, 1);
  for (int64_t l0 = 0; l0 < lanes; l0 += W) {
    const int m = lanes - l0 < W ? (int)(lanes - l0) : W;
    float *p = x + 2 * (base + l0);
    SFX(load_strided)(p, st, f->n, m, buf);
    if (inverse) SFX(swap)(buf, f->n);
    CV *z = SFX(run)(f, buf, tmp);
    if (inverse) SFX(swap)(z, f->n);
    SFX(store_strided)(p, st, f->n, m, z, scale);
  }
}

static void SFX(rows)(const tl_fft1 *f, float *x, int64_t base, int64_t lines, int64_t ld, int inverse, float scale,
                      float *scratch) {
  CV *buf = SFX(scratch_cv)(scratch, f, 0), *tmp = SFX(scratch_cv)(scratch, f, 1);
  for (int64_t l0 = 0; l0 < lines; l0 += W) {
    const int m = lines - l0 < W ? (int)(lines - l0) : W;
    float *p = x + 2 * (base + l0 * ld);
    SFX(load_rows)(p, 2 * ld, 2 * f->n, m, (VF *)buf);
    if (inverse) SFX(swap)(buf, f->n);
    CV *z = SFX(run)(f, buf, tmp);
    if (inverse) SFX(swap)(z, f->n);
    SFX(store_rows)(p, 2 * ld, 2 * f->n, m, (const VF *)z, scale);
  }
}

static int64_t SFX(r2c)(const tl_fft1 *f, const float *in, int64_t ldi, float *out, int64_t ldo, int64_t lines,
                        float *scratch) {
  CV *buf = SFX(scratch_cv)(scratch, f, 0), *tmp = SFX(scratch_cv)(scratch, f, 1), *aux = SFX(scratch_cv)(scratch, f, 2);
  const int n = f->real, h = n / 2 + 1;
  int64_t live = 0;
  for (int64_t l0 = 0; l0 < lines; l0 += W) {
    const int m = lines - l0 < W ? (int)(lines - l0) : W;
    const float *src = in + l0 * ldi;
    float *dst = out + 2 * l0 * ldo;
    int nz = 0;
    for (int l = 0; l < m; l++) {
      for (int i = 0; i < n; i++) {
        if (src[l * ldi + i] != 0) {
          nz++;
          break;
        }
      }
    }
    live += nz;
    if (nz == 0) {
      for (int l = 0; l < m; l++) memset(dst + 2 * l * ldo, 0, 8 * (size_t)h);
      continue;
    }
    CV *X;
    if (f->post) { // even n: the n/2-point transform of z[t] = x[2t] + i·x[2t+1]
      const int M = f->n;
      SFX(load_rows)(src, ldi, n, m, (VF *)buf);
      CV *z = SFX(run)(f, buf, tmp);
      X = z == buf ? tmp : buf;
      for (int k = 0; k <= M; k++) {
        const CV zk = z[k % M], zc = {z[(M - k) % M].re, -z[(M - k) % M].im};
        const CV e = SFX(add)(zk, zc), d = SFX(sub)(zk, zc);
        const CV o = {d.im, -d.re}; // −i·d
        const CV wo = SFX(mulw)(o, f->post[2 * k], f->post[2 * k + 1]);
        X[k] = (CV){(e.re + wo.re) * 0.5f, (e.im + wo.im) * 0.5f};
      }
    } else { // odd n: the complex transform of the real line
      VF *r = (VF *)aux;
      SFX(load_rows)(src, ldi, n, m, r);
      for (int i = 0; i < n; i++) buf[i] = (CV){r[i], (VF){0}};
      X = SFX(run)(f, buf, tmp);
    }
    SFX(store_rows)(dst, 2 * ldo, 2 * h, m, (const VF *)X, 1);
  }
  return live;
}

static void SFX(c2r)(const tl_fft1 *f, const float *in, int64_t ldi, float *out, int64_t ldo, int64_t lines,
                     float scale, float *scratch) {
  CV *buf = SFX(scratch_cv)(scratch, f, 0), *tmp = SFX(scratch_cv)(scratch, f, 1), *aux = SFX(scratch_cv)(scratch, f, 2);
  const int n = f->real, h = n / 2 + 1;
  for (int64_t l0 = 0; l0 < lines; l0 += W) {
    const int m = lines - l0 < W ? (int)(lines - l0) : W;
    float *dst = out + l0 * ldo;
    SFX(load_rows)(in + 2 * l0 * ldi, 2 * ldi, 2 * h, m, (VF *)aux); // X[k], k < h
    const CV *X = aux;
    if (f->post) { // even n: Z[k] = E + i·O, E = X[k] + conj X[M−k], O = w^−k (X[k] − conj X[M−k])
      const int M = f->n;
      for (int k = 0; k < M; k++) {
        const CV xc = {X[M - k].re, -X[M - k].im};
        const CV e = SFX(add)(X[k], xc);
        const CV o = SFX(mulw)(SFX(sub)(X[k], xc), f->post[2 * k], -f->post[2 * k + 1]);
        // swapped for the inverse: swap(e + i·o) = (e.im + o.re, e.re − o.im)
        buf[k] = (CV){e.im + o.re, e.re - o.im};
      }
      CV *z = SFX(run)(f, buf, tmp);
      SFX(swap)(z, M);
      SFX(store_rows)(dst, ldo, n, m, (const VF *)z, scale);
    } else { // odd n: the full Hermitian spectrum, inverted, real part
      for (int k = 0; k < h; k++) buf[k] = (CV){X[k].im, X[k].re};
      for (int k = 1; k < h; k++) buf[n - k] = (CV){-X[k].im, X[k].re};
      CV *z = SFX(run)(f, buf, tmp);
      VF *r = (VF *)(z == buf ? tmp : buf);
      for (int i = 0; i < n; i++) r[i] = z[i].im; // swap back: the real part
      SFX(store_rows)(dst, ldo, n, m, r, scale);
    }
  }
}
