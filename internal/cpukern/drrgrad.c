// Line integrals of a voxel volume (as drr.c, in double) with their
// derivatives with respect to each ray's end points, and the adjoint of the
// map from the volume's values to the integrals.
//
// Trilinear: out = w * sum_k V(q_k), q_k = src + f_k (dst - src),
// f_k = (k + 1/2) step/lref, w = step len/lref held fixed, so
// d out/d src = w sum_k (1 - f_k) grad V(q_k) and
// d out/d dst = w sum_k f_k grad V(q_k), grad V the gradient (per mm) of
// the trilinear interpolant within the sample's cell. The loop sums
// grad V and k grad V, f_k being linear in k.
//
// Siddon: out = len * sum_k V_k (a_{k+1} - a_k) over the voxels crossed, a
// the crossing fractions. A crossing of the plane x_ax = p at
// a = (p - src_ax)/(dst_ax - src_ax) moves by
// -((1 - a) dsrc_ax + a ddst_ax)/(dst_ax - src_ax), and out by
// len (V_before - V_after) times that; the box's entry and exit count as
// crossings with the value 0 outside, the segment's own ends (inside the
// box) do not move with it. At a tie (the ray through an edge or corner)
// the axes are taken in turn, as if one crossed just before the other.
#include "drrgrad.h"
#include "drr_internal.h"
#include "isa.h"
#include "pairdist.h"
#include <math.h>
#include <stddef.h>
#include <stdint.h>

// clip_axes is tl_clip with the same arithmetic, also naming the axes of
// the entry and the exit planes (-1 where the segment's own end lies in
// the box).
static int clip_axes(const tl_volume *vol, const double *src, const double *d, double *amin, double *amax, int *ain,
                     int *aout) {
  double lo = 0, hi = 1;
  int li = -1, hi_ax = -1;
  for (int ax = 0; ax < 3; ax++) {
    double b0 = vol->o[ax], b1 = vol->o[ax] + vol->n[ax] * vol->s[ax];
    if (d[ax] == 0) {
      if (src[ax] < b0 || src[ax] >= b1) return 0;
      continue;
    }
    double a0 = (b0 - src[ax]) / d[ax], a1 = (b1 - src[ax]) / d[ax];
    if (a0 > a1) { double t = a0; a0 = a1; a1 = t; }
    if (a0 > lo) { lo = a0; li = ax; }
    if (a1 < hi) { hi = a1; hi_ax = ax; }
  }
  *amin = lo;
  *amax = hi;
  *ain = li;
  *aout = hi_ax;
  return lo < hi;
}

// siddon_ray walks the ray as drr.c's siddon() does and returns its line
// integral. With gs (and gd) it sets the derivatives; with grad it adds
// g times the integral's derivative with respect to each voxel's value.
static double siddon_ray(const tl_volume *vol, const double *src, const double *dst, double *gs, double *gd,
                         double g, double *grad) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double amin, amax;
  int ain, aout;
  if (gs) gs[0] = gs[1] = gs[2] = gd[0] = gd[1] = gd[2] = 0;
  if (!clip_axes(vol, src, d, &amin, &amax, &ain, &aout)) return 0;
  double next[3], inc[3];
  int64_t idx[3];
  for (int ax = 0; ax < 3; ax++) tl_axis_start(vol, ax, src, d, amin, &next[ax], &inc[ax], &idx[ax]);
  const int64_t ny = vol->n[1], nz = vol->n[2];
  const int64_t stride[3] = {ny * nz, nz, 1};
  int64_t step[3], off = (idx[0] * ny + idx[1]) * nz + idx[2];
  int64_t left[3];
  for (int ax = 0; ax < 3; ax++) {
    step[ax] = d[ax] > 0 ? stride[ax] : -stride[ax];
    left[ax] = d[ax] > 0 ? vol->n[ax] - 1 - idx[ax] : idx[ax];
  }
  const double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  const float *v = vol->v;
  // Per axis, the sums over its crossings of J (1 - a) and J a, J the
  // value before the crossing less the value after.
  double p[3] = {0, 0, 0}, r[3] = {0, 0, 0};
  if (gs && ain >= 0) {
    double j = -(double)v[off];
    p[ain] += j * (1 - amin);
    r[ain] += j * amin;
  }
  double acc = 0, a = amin;
  int exit_ax = aout;
  double exit_a = amax;
  for (;;) {
    int ax = 0;
    if (next[1] < next[ax]) ax = 1;
    if (next[2] < next[ax]) ax = 2;
    double b = next[ax] < amax ? next[ax] : amax;
    acc += (b - a) * (v ? v[off] : 0);
    if (grad) grad[off] += g * len * (b - a);
    if (b >= amax) break;
    a = b;
    int out = 0;
    for (int q = 0; q < 3; q++) {
      if (next[q] <= b) {
        if (left[q] == 0) { // the exit, found before amax by rounding
          exit_ax = q;
          exit_a = b;
          out = 1;
          break;
        }
        left[q]--;
        if (gs) {
          double j = (double)v[off] - (double)v[off + step[q]];
          p[q] += j * (1 - b);
          r[q] += j * b;
        }
        off += step[q];
        next[q] += inc[q];
      }
    }
    if (out) break;
  }
  if (gs) {
    if (exit_ax >= 0) {
      double j = (double)v[off];
      p[exit_ax] += j * (1 - exit_a);
      r[exit_ax] += j * exit_a;
    }
    for (int ax = 0; ax < 3; ax++) {
      if (d[ax] == 0) continue; // no crossings
      double c = -len / d[ax];
      gs[ax] = c * p[ax];
      gd[ax] = c * r[ax];
    }
  }
  return acc * len;
}

// A ray prepared for trilinear sampling: count samples, the first at
// continuous index u (voxel centres at integers) and fraction fa of the
// segment, each next du (index) and da (fraction) further, each weighing
// w mm. As drr.c's prepare, in double.
typedef struct {
  double u[3], du[3];
  double fa, da, w;
  int64_t count;
} gray;

static int gprepare(const tl_volume *vol, int padded, const double *src, const double *dst, double step, double lref,
                    gray *r) {
  double d[3] = {dst[0] - src[0], dst[1] - src[1], dst[2] - src[2]};
  double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (len == 0) return 0;
  double da = step / (lref > 0 ? lref : len);
  tl_volume grown = *vol;
  for (int ax = 0; ax < 3; ax++) {
    double half = padded ? 0.5 : -0.5;
    grown.o[ax] += half * vol->s[ax];
    grown.n[ax] -= padded ? 1 : -1;
  }
  double amin, amax;
  if (!tl_clip(&grown, src, d, 3, &amin, &amax)) return 0;
  double q0 = ceil(amin / da - 0.5), q1 = floor(amax / da - 0.5);
  if (q1 < q0) return 0;
  r->count = (int64_t)(q1 - q0) + 1;
  r->da = da;
  r->fa = (q0 + 0.5) * da;
  r->w = da * len;
  for (int ax = 0; ax < 3; ax++) {
    r->u[ax] = (src[ax] + r->fa * d[ax] - vol->o[ax]) / vol->s[ax] - 0.5;
    r->du[ax] = da * d[ax] / vol->s[ax];
  }
  return 1;
}

// cell finds the cell of the sample at continuous index (x, y, z): the
// offset of its low corner, the fractions t, and whether all eight corners
// lie in the volume. In a padded volume the sample lies in it (clipped to
// the centres' box; rounding is clamped to the border cells).
static inline __attribute__((always_inline)) int cell(const int64_t *n, int padded, double x, double y, double z,
                                                      int64_t *ijk, double *t) {
  if (padded) {
    int64_t i = (int64_t)(x > 0 ? x : 0), j = (int64_t)(y > 0 ? y : 0), k = (int64_t)(z > 0 ? z : 0);
    i = i < n[0] - 2 ? i : n[0] - 2;
    j = j < n[1] - 2 ? j : n[1] - 2;
    k = k < n[2] - 2 ? k : n[2] - 2;
    ijk[0] = i, ijk[1] = j, ijk[2] = k;
    t[0] = x - (double)i, t[1] = y - (double)j, t[2] = z - (double)k;
    return 1;
  }
  double fx = floor(x), fy = floor(y), fz = floor(z);
  ijk[0] = (int64_t)fx, ijk[1] = (int64_t)fy, ijk[2] = (int64_t)fz;
  t[0] = x - fx, t[1] = y - fy, t[2] = z - fz;
  return ijk[0] >= 0 && ijk[1] >= 0 && ijk[2] >= 0 && ijk[0] < n[0] - 1 && ijk[1] < n[1] - 1 && ijk[2] < n[2] - 1;
}

// tri_grad_body is the trilinear sum of one ray and, with gs, its
// derivatives. A cell at the border of an unpadded volume reads zero for
// its corners outside.
enum { PF = 12 }; // samples prefetched ahead

static inline __attribute__((always_inline)) double tri_grad_body(const tl_volume *vol, int padded, const gray *r,
                                                                  double *gs, double *gd) {
  const int64_t *n = vol->n;
  const int64_t sj = n[2], si = n[1] * n[2];
  const float *v = vol->v;
  double sum = 0, a0 = 0, a1 = 0, a2 = 0, b0 = 0, b1 = 0, b2 = 0;
  const double u0 = r->u[0], u1 = r->u[1], u2 = r->u[2], du0 = r->du[0], du1 = r->du[1], du2 = r->du[2];
  for (int64_t q = 0; q < r->count; q++) {
    const double qd = (double)q;
    const double x = u0 + qd * du0, y = u1 + qd * du1, z = u2 + qd * du2;
    int64_t ijk[3];
    double t[3];
    double c[8];
    if (padded) {
      // Ask for the cells PF samples ahead: a ray's voxels come from L3
      // or memory, and one ray's loads alone overlap too few misses.
      const double pq = qd + PF;
      int64_t pijk[3];
      double pt[3];
      cell(n, 1, u0 + pq * du0, u1 + pq * du1, u2 + pq * du2, pijk, pt);
      const float *pp = v + pijk[0] * si + pijk[1] * sj + pijk[2];
      TL_PREFETCH(pp);
      TL_PREFETCH(pp + sj);
      TL_PREFETCH(pp + si);
      TL_PREFETCH(pp + si + sj);
    }
    if (cell(n, padded, x, y, z, ijk, t)) {
      const float *p = v + ijk[0] * si + ijk[1] * sj + ijk[2];
      c[0] = p[0], c[1] = p[1], c[2] = p[sj], c[3] = p[sj + 1];
      c[4] = p[si], c[5] = p[si + 1], c[6] = p[si + sj], c[7] = p[si + sj + 1];
    } else {
      for (int m = 0; m < 8; m++) {
        int64_t ii = ijk[0] + (m >> 2), jj = ijk[1] + (m >> 1 & 1), kk = ijk[2] + (m & 1);
        c[m] = ii < 0 || jj < 0 || kk < 0 || ii >= n[0] || jj >= n[1] || kk >= n[2] ? 0 : v[(ii * n[1] + jj) * n[2] + kk];
      }
    }
    const double tu = t[0], tv = t[1], tw = t[2];
    const double e00 = c[1] - c[0], e01 = c[3] - c[2], e10 = c[5] - c[4], e11 = c[7] - c[6];
    const double c00 = c[0] + tw * e00, c01 = c[2] + tw * e01, c10 = c[4] + tw * e10, c11 = c[6] + tw * e11;
    const double d0 = c01 - c00, d1 = c11 - c10;
    const double c0 = c00 + tv * d0, c1 = c10 + tv * d1;
    const double gu = c1 - c0;
    sum += c0 + tu * gu;
    if (gs) {
      const double gv = d0 + tu * (d1 - d0);
      const double w0 = e00 + tv * (e01 - e00), w1 = e10 + tv * (e11 - e10);
      const double gw = w0 + tu * (w1 - w0);
      a0 += gu, a1 += gv, a2 += gw;
      b0 += qd * gu, b1 += qd * gv, b2 += qd * gw;
    }
  }
  if (gs) {
    // sum_k f_k G_k = fa A + da B; per mm: divided by the spacing.
    const double a[3] = {a0, a1, a2}, b[3] = {b0, b1, b2};
    for (int ax = 0; ax < 3; ax++) {
      double all = r->w * a[ax] / vol->s[ax], far = r->w * (r->fa * a[ax] + r->da * b[ax]) / vol->s[ax];
      gd[ax] = far;
      gs[ax] = all - far;
    }
  }
  return sum * r->w;
}

// A padded volume needs two voxels a side for its clamped cells.
static int padded_ok(const int64_t *n, int padded) { return padded && n[0] >= 2 && n[1] >= 2 && n[2] >= 2; }

static void tri_grad_rays(const tl_volume *vol, int padded, int64_t nrays, const double *src, const double *dst,
                          double *out, double *gsrc, double *gdst, double step, double lref) {
  for (int64_t i = 0; i < nrays; i++) {
    gray r;
    double *gs = gsrc ? gsrc + 3 * i : NULL, *gd = gdst ? gdst + 3 * i : NULL;
    if (!gprepare(vol, padded, src + 3 * i, dst + 3 * i, step, lref, &r)) {
      out[i] = 0;
      if (gs) gs[0] = gs[1] = gs[2] = gd[0] = gd[1] = gd[2] = 0;
      continue;
    }
    if (padded_ok(vol->n, padded))
      out[i] = gs ? tri_grad_body(vol, 1, &r, gs, gd) : tri_grad_body(vol, 1, &r, NULL, NULL);
    else
      out[i] = tri_grad_body(vol, 0, &r, gs, gd);
  }
}

#if TL_X86
// The same with AVX2 and FMA: floor and the multiply-adds in one
// instruction each.
__attribute__((target("avx2,fma"))) static void tri_grad_rays_avx2(const tl_volume *vol, int padded, int64_t nrays,
                                                                   const double *src, const double *dst, double *out,
                                                                   double *gsrc, double *gdst, double step,
                                                                   double lref) {
  for (int64_t i = 0; i < nrays; i++) {
    gray r;
    double *gs = gsrc ? gsrc + 3 * i : NULL, *gd = gdst ? gdst + 3 * i : NULL;
    if (!gprepare(vol, padded, src + 3 * i, dst + 3 * i, step, lref, &r)) {
      out[i] = 0;
      if (gs) gs[0] = gs[1] = gs[2] = gd[0] = gd[1] = gd[2] = 0;
      continue;
    }
    if (padded_ok(vol->n, padded))
      out[i] = gs ? tri_grad_body(vol, 1, &r, gs, gd) : tri_grad_body(vol, 1, &r, NULL, NULL);
    else
      out[i] = tri_grad_body(vol, 0, &r, gs, gd);
  }
}
#endif

#if TL_X86
// tri_grad8 is tri_grad_body for up to 8 rays of a padded volume at once,
// one in each lane of AVX-512 double vectors: their cells' voxels fetched
// with gathers (a voxel and its neighbour along z as one 8-byte element),
// which keep many more loads in flight than one ray's walk; the arithmetic
// is the scalar path's, lane by lane. Lanes whose ray has no samples (count
// 0) idle. Needs voxel offsets that fit in int32.
__attribute__((target("avx512f"))) static void tri_grad8(const tl_volume *vol, const gray *r, int nr, double *out,
                                                         double *gsrc, double *gdst) {
  double u[3][8], du[3][8], cnt[8];
  int64_t most = 0;
  for (int l = 0; l < 8; l++) {
    int live = l < nr && r[l].count > 0;
    for (int ax = 0; ax < 3; ax++) {
      u[ax][l] = live ? r[l].u[ax] : 0;
      du[ax][l] = live ? r[l].du[ax] : 0;
    }
    cnt[l] = live ? (double)r[l].count : 0;
    if (live && r[l].count > most) most = r[l].count;
  }
  const int32_t sj = (int32_t)vol->n[2], si = (int32_t)(vol->n[1] * vol->n[2]);
  const __m512d u0 = _mm512_loadu_pd(u[0]), u1 = _mm512_loadu_pd(u[1]), u2 = _mm512_loadu_pd(u[2]);
  const __m512d du0 = _mm512_loadu_pd(du[0]), du1 = _mm512_loadu_pd(du[1]), du2 = _mm512_loadu_pd(du[2]);
  const __m512d vcnt = _mm512_loadu_pd(cnt), zero = _mm512_setzero_pd();
  const __m256i hi0 = _mm256_set1_epi32((int32_t)vol->n[0] - 2), hi1 = _mm256_set1_epi32((int32_t)vol->n[1] - 2),
                hi2 = _mm256_set1_epi32((int32_t)vol->n[2] - 2);
  const __m256i vsi = _mm256_set1_epi32(si), vsj = _mm256_set1_epi32(sj);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
  const float *v = vol->v;
  __m512d sum = zero, a0 = zero, a1 = zero, a2 = zero, b0 = zero, b1 = zero, b2 = zero;
// OFFSETS: the clamped cell of position (X, Y, Z) as int32 lanes I, J, K
// and the offset O of its low corner.
#define OFFSETS(X, Y, Z, I, J, K, O)                                                         \
  __m256i I = _mm256_min_epi32(_mm512_cvttpd_epi32(_mm512_max_pd(X, zero)), hi0);            \
  __m256i J = _mm256_min_epi32(_mm512_cvttpd_epi32(_mm512_max_pd(Y, zero)), hi1);            \
  __m256i K = _mm256_min_epi32(_mm512_cvttpd_epi32(_mm512_max_pd(Z, zero)), hi2);            \
  __m256i O = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(I, vsi), _mm256_mullo_epi32(J, vsj)), K)
  for (int64_t q = 0; q < most; q++) {
    const __m512d qd = _mm512_set1_pd((double)q);
    const __mmask8 on = _mm512_cmp_pd_mask(qd, vcnt, _CMP_LT_OQ);
    {
      const __m512d pq = _mm512_set1_pd((double)(q + PF));
      OFFSETS(_mm512_fmadd_pd(pq, du0, u0), _mm512_fmadd_pd(pq, du1, u1), _mm512_fmadd_pd(pq, du2, u2), pi, pj, pk, po);
      int32_t pl[8];
      _mm256_storeu_si256((__m256i *)pl, po);
      for (int l = 0; l < 8; l++) {
        const float *pp = v + pl[l];
        TL_PREFETCH(pp);
        TL_PREFETCH(pp + sj);
        TL_PREFETCH(pp + si);
        TL_PREFETCH(pp + si + sj);
      }
      (void)pi, (void)pj, (void)pk;
    }
    const __m512d x = _mm512_fmadd_pd(qd, du0, u0), y = _mm512_fmadd_pd(qd, du1, u1), z = _mm512_fmadd_pd(qd, du2, u2);
    OFFSETS(x, y, z, i, j, k, off);
    const __m512d tu = _mm512_sub_pd(x, _mm512_cvtepi32_pd(i)), tv = _mm512_sub_pd(y, _mm512_cvtepi32_pd(j)),
                  tw = _mm512_sub_pd(z, _mm512_cvtepi32_pd(k));
#define PAIR(o, c0, c1)                                                                                            \
  do {                                                                                                             \
    __m512 g = _mm512_castpd_ps(_mm512_mask_i32gather_pd(zero, on, _mm256_add_epi32(off, _mm256_set1_epi32(o)), v, 4)); \
    c0 = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_permutexvar_ps(even, g)));                                  \
    c1 = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_permutexvar_ps(odd, g)));                                   \
  } while (0)
    __m512d c000, c001, c010, c011, c100, c101, c110, c111;
    PAIR(0, c000, c001);
    PAIR(sj, c010, c011);
    PAIR(si, c100, c101);
    PAIR(si + sj, c110, c111);
#undef PAIR
    const __m512d e00 = _mm512_sub_pd(c001, c000), e01 = _mm512_sub_pd(c011, c010), e10 = _mm512_sub_pd(c101, c100),
                  e11 = _mm512_sub_pd(c111, c110);
    const __m512d c00 = _mm512_fmadd_pd(tw, e00, c000), c01 = _mm512_fmadd_pd(tw, e01, c010),
                  c10 = _mm512_fmadd_pd(tw, e10, c100), c11 = _mm512_fmadd_pd(tw, e11, c110);
    const __m512d d0 = _mm512_sub_pd(c01, c00), d1 = _mm512_sub_pd(c11, c10);
    const __m512d c0 = _mm512_fmadd_pd(tv, d0, c00), c1 = _mm512_fmadd_pd(tv, d1, c10);
    const __m512d gu = _mm512_sub_pd(c1, c0);
    const __m512d gv = _mm512_fmadd_pd(tu, _mm512_sub_pd(d1, d0), d0);
    const __m512d w0 = _mm512_fmadd_pd(tv, _mm512_sub_pd(e01, e00), e00), w1 = _mm512_fmadd_pd(tv, _mm512_sub_pd(e11, e10), e10);
    const __m512d gw = _mm512_fmadd_pd(tu, _mm512_sub_pd(w1, w0), w0);
    sum = _mm512_mask_add_pd(sum, on, sum, _mm512_fmadd_pd(tu, gu, c0));
    a0 = _mm512_mask_add_pd(a0, on, a0, gu);
    a1 = _mm512_mask_add_pd(a1, on, a1, gv);
    a2 = _mm512_mask_add_pd(a2, on, a2, gw);
    b0 = _mm512_mask3_fmadd_pd(qd, gu, b0, on);
    b1 = _mm512_mask3_fmadd_pd(qd, gv, b1, on);
    b2 = _mm512_mask3_fmadd_pd(qd, gw, b2, on);
  }
#undef OFFSETS
  double S[8], A[3][8], B[3][8];
  _mm512_storeu_pd(S, sum);
  _mm512_storeu_pd(A[0], a0), _mm512_storeu_pd(A[1], a1), _mm512_storeu_pd(A[2], a2);
  _mm512_storeu_pd(B[0], b0), _mm512_storeu_pd(B[1], b1), _mm512_storeu_pd(B[2], b2);
  for (int l = 0; l < nr; l++) {
    out[l] = S[l] * r[l].w;
    if (!gsrc) continue;
    for (int ax = 0; ax < 3; ax++) {
      double all = r[l].w * A[ax][l] / vol->s[ax], far = r[l].w * (r[l].fa * A[ax][l] + r[l].da * B[ax][l]) / vol->s[ax];
      gdst[3 * l + ax] = far;
      gsrc[3 * l + ax] = all - far;
    }
  }
}

// tri_grad_rays8 takes the rays 8 at a time through tri_grad8.
static void tri_grad_rays8(const tl_volume *vol, int64_t nrays, const double *src, const double *dst, double *out,
                           double *gsrc, double *gdst, double step, double lref) {
  for (int64_t i = 0; i < nrays; i += 8) {
    int nr = nrays - i < 8 ? (int)(nrays - i) : 8;
    gray r[8];
    for (int l = 0; l < nr; l++)
      if (!gprepare(vol, 1, src + 3 * (i + l), dst + 3 * (i + l), step, lref, &r[l])) r[l] = (gray){.count = 0};
    tri_grad8(vol, r, nr, out + i, gsrc ? gsrc + 3 * i : NULL, gdst ? gdst + 3 * i : NULL);
  }
}
#endif

void tl_drr_grad(const float *v, const int64_t *n, const double *o, const double *s, int padded, int64_t nrays,
                 const double *src, const double *dst, double *out, double *gsrc, double *gdst, double step,
                 double lref) {
  tl_volume vol = {v, {n[0], n[1], n[2]}, {o[0], o[1], o[2]}, {s[0], s[1], s[2]}};
  if (step > 0) {
#if TL_X86
    if (tl_cpu_isa() == TL_ISA_AVX512 && padded_ok(n, padded) && n[0] * n[1] * n[2] < ((int64_t)1 << 31) - 1) {
      tri_grad_rays8(&vol, nrays, src, dst, out, gsrc, gdst, step, lref);
      return;
    }
    if (tl_cpu_isa() >= TL_ISA_AVX2) {
      tri_grad_rays_avx2(&vol, padded, nrays, src, dst, out, gsrc, gdst, step, lref);
      return;
    }
#endif
    tri_grad_rays(&vol, padded, nrays, src, dst, out, gsrc, gdst, step, lref);
    return;
  }
  for (int64_t i = 0; i < nrays; i++)
    out[i] = siddon_ray(&vol, src + 3 * i, dst + 3 * i, gsrc ? gsrc + 3 * i : NULL, gdst ? gdst + 3 * i : NULL, 0,
                        NULL);
}

// tri_back adds g w times each sample's trilinear weights to its cell's
// corners.
static void tri_back(const tl_volume *vol, int padded, const gray *r, double g, double *grad) {
  const int64_t *n = vol->n;
  const int64_t sj = n[2], si = n[1] * n[2];
  const double gw = g * r->w;
  for (int64_t q = 0; q < r->count; q++) {
    const double qd = (double)q;
    const double x = r->u[0] + qd * r->du[0], y = r->u[1] + qd * r->du[1], z = r->u[2] + qd * r->du[2];
    int64_t ijk[3];
    double t[3];
    int in = cell(n, padded, x, y, z, ijk, t);
    const double tu = t[0], tv = t[1], tw = t[2];
    double wt[8];
    for (int m = 0; m < 8; m++)
      wt[m] = gw * ((m >> 2) ? tu : 1 - tu) * ((m >> 1 & 1) ? tv : 1 - tv) * ((m & 1) ? tw : 1 - tw);
    if (in) {
      double *p = grad + ijk[0] * si + ijk[1] * sj + ijk[2];
      p[0] += wt[0], p[1] += wt[1], p[sj] += wt[2], p[sj + 1] += wt[3];
      p[si] += wt[4], p[si + 1] += wt[5], p[si + sj] += wt[6], p[si + sj + 1] += wt[7];
      continue;
    }
    for (int m = 0; m < 8; m++) {
      int64_t ii = ijk[0] + (m >> 2), jj = ijk[1] + (m >> 1 & 1), kk = ijk[2] + (m & 1);
      if (ii < 0 || jj < 0 || kk < 0 || ii >= n[0] || jj >= n[1] || kk >= n[2]) continue;
      grad[(ii * n[1] + jj) * n[2] + kk] += wt[m];
    }
  }
}

void tl_drr_backproject(const int64_t *n, const double *o, const double *s, int padded, int64_t nrays,
                        const double *src, const double *dst, const double *g, double *grad, double step,
                        double lref) {
  tl_volume vol = {NULL, {n[0], n[1], n[2]}, {o[0], o[1], o[2]}, {s[0], s[1], s[2]}};
  for (int64_t i = 0; i < nrays; i++) {
    if (g[i] == 0) continue;
    if (step <= 0) {
      siddon_ray(&vol, src + 3 * i, dst + 3 * i, NULL, NULL, g[i], grad);
      continue;
    }
    gray r;
    if (gprepare(&vol, padded, src + 3 * i, dst + 3 * i, step, lref, &r))
      tri_back(&vol, padded_ok(n, padded), &r, g[i], grad);
  }
}
