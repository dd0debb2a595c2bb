// The fan paths of drr_fan.c, fanz and fan_siddon, for one instruction
// set: drr_fan.c includes this file once per set, with the set's target
// pragma in force and the names below defined, and drr_fan_undef.h after.
//
// SFX(name) names the set's copies. The operations that differ from set to
// set go by these names (arithmetic, + - * /, is written with GCC's vector
// operators, which is how GCC's own headers define those intrinsics):
//
//   - trilinear, W floats per vector: VF the vector, VI its int32 twin, FM
//     a mask of its lanes, LM a masked load's mask; F_SET1, F_ZERO,
//     F_LOADU, F_STOREU, F_FMADD, F_MIN, F_MAX, F_CMP (to an FM), F_TRUNC
//     (to int32, truncating), F_FROMI, I_SET1, I_ADD, I_SUB, I_MIN, FM_AND,
//     FM_NONE (no lane set); F_MLOAD(p, lm): lanes outside lm read zero;
//     F_GATHER(p, i, fm): p[i] in fm, zero elsewhere; F_ADDWHERE(a, fm, b):
//     a + b in fm, a elsewhere; PICK2(lo, i, hi): element i (< 2W) of lo
//     followed by hi; SFX(first)(n): an LM of the lanes below n (n ≥ 1),
//     FM_FIRST(n) the same as an FM, LM_NONE no lane;
//     SFX(columns)(v, idx, in, offs, ws, &c0, &c1): by gathers, in the
//     lanes in, the blend with weights ws[q] of the voxels at
//     v + idx + offs[q] (c0) and of those above them (c1);
//   - Siddon, WD doubles per vector: VD the vector, MD a mask of its lanes,
//     KT a vector of z voxel indices; D_SET1, D_ZERO, D_LOADU, D_STOREU,
//     D_FMADD, D_MIN, D_MAX, D_CMP (to an MD), MD_AND, MD_NONE;
//     D_BLEND(m, a, b): b in m, a elsewhere; K_SET1, K_ADD, K_BLEND (as
//     D_BLEND); SFX(voxel_at)(z, down, kmax): the voxel a ray at continuous
//     index z is in just after (floor(z), or ceil(z) - 1 going down),
//     clamped to [0, kmax]; SFX(plane)(k, up): as a double, the index of
//     the next plane, k+1 going up, else k; SFX(inside)(k, kmax): the lanes
//     with k in [0, kmax]; SFX(add_voxel)(acc, on, piece, cp, k, nz): acc
//     plus piece times voxel k of the column at cp (nz voxels), in the lanes
//     on.
//
// And how the set goes about it:
//
//   - COLUMN_WINDOW: whether, in a chunk too tall to blend in advance, a
//     vector whose rays lie within 2W-1 voxels in z reads them from the
//     columns by loads (else it gathers);
//   - FAN_SIDDON: whether the set has Siddon's fan path (the names of the
//     Siddon list above are needed only then);
//   - SIDDON_RAYS: the rays of one chunk of Siddon's path; SIDDON_PREFETCH:
//     whether the chunk prefetches the voxels FANPF segments ahead.

// blend4 is the bilinear blend in x and y of the four columns col[q] with
// weights ws[q], at the W heights from off on (lanes outside lm read zero).
static inline __attribute__((always_inline)) VF SFX(blend4)(const VF ws[4], const float *const col[4], int32_t off,
                                                              LM lm) {
  VF b = ws[0] * F_MLOAD(col[0] + off, lm);
  b = F_FMADD(ws[1], F_MLOAD(col[1] + off, lm), b);
  b = F_FMADD(ws[2], F_MLOAD(col[2] + off, lm), b);
  return F_FMADD(ws[3], F_MLOAD(col[3] + off, lm), b);
}

// sample adds the values at one sample of fanz, at a = af in float, of a
// chunk's nv vectors of rays (z slopes ci, first and last lanes' slopes
// cfirst and clast, lanes live) to their partial sums part: read from buf,
// the four columns blended from z = blo on, if blend, else from the
// columns themselves (col, at offsets offs from base in v; weights ws).
// fanz inlines it with blend a constant, so that each case gets a loop of
// its own.
static inline __attribute__((always_inline)) void SFX(sample)(const int blend, int nv, const VF *ci, const FM *live,
                                                              const float *cfirst, const float *clast, VF *part,
                                                              float af, float fazf, float fzhi, int32_t nz,
                                                              const float *buf, int32_t blo, const float *v,
                                                              int32_t base, const int32_t offs[4], const VF ws[4],
                                                              const float *const col[4]) {
  const VF zero = F_ZERO(), vzhi = F_SET1(fzhi), va = F_SET1(af), vaz = F_SET1(fazf);
  const VI one = I_SET1(1), vnz2 = I_SET1(nz - 2);
  for (int j = 0; j < nv; j++) {
    const VF z = F_FMADD(va, ci[j], vaz);
    const FM in = FM_AND(live[j], FM_AND(F_CMP(z, zero, _CMP_GE_OQ), F_CMP(z, vzhi, _CMP_LE_OQ)));
    if (FM_NONE(in)) continue;
    const VF zc = F_MIN(F_MAX(z, zero), vzhi);
    const VI iz = I_MIN(F_TRUNC(zc), vnz2);
    const VF fz = zc - F_FROMI(iz);
    // The rays' z are monotonic across lanes: the window of z the
    // vector reads runs from its first to its last lane, computed
    // here with the same float operations as the lanes.
    const float z0 = fmaf(af, cfirst[j], fazf), z1 = fmaf(af, clast[j], fazf);
    const float zmin = z0 < z1 ? z0 : z1, zmax = z0 < z1 ? z1 : z0;
    int32_t wlo = (int32_t)(zmin < 0 ? 0 : zmin), whi = (int32_t)(zmax > fzhi ? fzhi : zmax); // as iz
    if (wlo > nz - 2) wlo = nz - 2;
    if (whi > nz - 2) whi = nz - 2;
    VF c0, c1;
    if (whi + 1 - wlo <= 2 * W - 1 && (blend || COLUMN_WINDOW)) {
      // The window, and the z neighbour above it, in 2W floats from
      // wlo on: from buf, or blended here from two loads per column
      // that stop at the column's end, so nothing past the volume is
      // read.
      VF L, H;
      if (blend) {
        L = F_LOADU(buf + (wlo - blo));
        H = F_LOADU(buf + (wlo - blo) + W);
      } else {
        const int32_t left = nz - wlo;
        L = SFX(blend4)(ws, col, wlo, SFX(first)(left));
        H = SFX(blend4)(ws, col, wlo + W, left > W ? SFX(first)(left - W) : LM_NONE);
      }
      const VI rel = I_SUB(iz, I_SET1(wlo));
      c0 = PICK2(L, rel, H);
      c1 = PICK2(L, I_ADD(rel, one), H);
    } else if (blend) { // rays further apart in z than a window
      const VI rel = I_SUB(iz, I_SET1(blo));
      c0 = F_GATHER(buf, rel, in);
      c1 = F_GATHER(buf, I_ADD(rel, one), in);
    } else {
      SFX(columns)(v, I_ADD(iz, I_SET1(base)), in, offs, ws, &c0, &c1);
    }
    part[j] = F_ADDWHERE(part[j], in, F_FMADD(fz, c1 - c0, c0));
  }
}

// fanz renders a fan of n rays from src to dst0 + i*dd that all share their
// x and y along the way (dd is along z), by trilinear samples at the same
// fractions a_k = (k + 1/2)*step/lref of every segment. At one a_k every ray
// of the fan lies in the same voxel column pair in x and y: the bilinear
// weights in x and y are computed once per sample for all rays, and the
// rays of a W-lane vector, which sit on neighbouring z in the same four
// columns, read them with contiguous loads and permutes in place of
// gathers. Needs a padded volume (zero border) of fewer than 2^31 voxels.
static void SFX(fanz)(const tl_volume *vol, const double *src, const double *dst0, const double *dd, int64_t n,
                      float *out, int64_t ostride, double step, double lref) {
  fan_geo g;
  fan_geometry(vol, src, dst0, dd, step, lref, &g);
  const int32_t nz = g.nz, si = g.si, sj = g.sj;
  const double da = g.da, az = g.az, bz = g.bz, gz = g.gz;
  const int64_t k0 = g.k0, k1 = g.k1;
  const float fzhi = (float)(nz - 1), fazf = (float)az;
  const VF zero = F_ZERO();
  const int32_t offs[4] = {0, sj, si, si + sj};
  const float *v = vol->v;
  for (int64_t r0 = 0; r0 < n; r0 += FANCH) {
    const int m = n - r0 < FANCH ? (int)(n - r0) : FANCH, nv = (m + W - 1) / W;
    VF ci[FANCH / W], part[FANCH / W];
    float cfirst[FANCH / W], clast[FANCH / W];
    FM live[FANCH / W];
    double acc[FANCH];
    for (int j = 0; j < nv; j++) {
      float c[W];
      for (int l = 0; l < W; l++) c[l] = (float)(bz + (double)(r0 + W * j + l) * gz);
      ci[j] = F_LOADU(c);
      const int last = m - W * j < W ? m - W * j - 1 : W - 1;
      cfirst[j] = c[0];
      clast[j] = c[last];
      live[j] = FM_FIRST(last + 1);
      part[j] = zero;
    }
    for (int i = 0; i < m; i++) acc[i] = 0;
    // The chunk's rays' z slopes span [cmin, cmax].
    const double ca = bz + (double)r0 * gz, cb = bz + (double)(r0 + m - 1) * gz;
    const double cmin = ca < cb ? ca : cb, cmax = ca < cb ? cb : ca;
    const float cminf = cfirst[0] < clast[nv - 1] ? cfirst[0] : clast[nv - 1];
    const float cmaxf = cfirst[0] < clast[nv - 1] ? clast[nv - 1] : cfirst[0];
    int32_t lastpf = -1;
    float buf[FANBUF];
    for (int64_t k = k0; k <= k1; k++) {
      const double a = (k + 0.5) * da;
      float w[4];
      const int32_t base = fan_cell(&g, a, w);
      const VF ws[4] = {F_SET1(w[0]), F_SET1(w[1]), F_SET1(w[2]), F_SET1(w[3])};
      const float *const col[4] = {v + base, v + base + sj, v + base + si, v + base + si + sj};
      if (k + FANPF <= k1) fan_prefetch(v, &g, (k + FANPF + 0.5) * da, cmin, cmax, &lastpf);
      const float af = (float)a;
      // The chunk's z range at this sample, in the lanes' own float
      // arithmetic (fmaf is monotonic in the slope).
      const float zA = fmaf(af, cminf, fazf), zB = fmaf(af, cmaxf, fazf);
      if (zB < 0 || zA > fzhi) goto next; // every ray of the chunk is above or below the volume
      {
        int32_t blo = (int32_t)(zA < 0 ? 0 : zA), bhi = (int32_t)(zB > fzhi ? fzhi : zB);
        if (blo > nz - 2) blo = nz - 2;
        if (bhi > nz - 2) bhi = nz - 2;
        const int32_t cnt = bhi + 2 - blo; // z = blo … bhi+1 are read
        // Where the chunk's z range fits in buf, blend the four columns once
        // for the whole chunk: buf[z - blo] is the bilinear value in x and y
        // at height z; each ray then needs only its two z neighbours from it.
        const int blend = cnt <= FANBUF - 2 * W;
        if (blend) {
          const int32_t left = nz - blo;
          for (int32_t z = 0; z < cnt; z += W) F_STOREU(buf + z, SFX(blend4)(ws, col, blo + z, SFX(first)(left - z)));
          SFX(sample)(1, nv, ci, live, cfirst, clast, part, af, fazf, fzhi, nz, buf, blo, v, base, offs, ws, col);
        } else {
          SFX(sample)(0, nv, ci, live, cfirst, clast, part, af, fazf, fzhi, nz, buf, blo, v, base, offs, ws, col);
        }
      }
    next:
      if (((k - k0) & 63) == 63) { // flush the float32 partial sums into double
        for (int j = 0; j < nv; j++) {
          float p[W];
          F_STOREU(p, part[j]);
          for (int l = 0; l < W && W * j + l < m; l++) acc[W * j + l] += p[l];
          part[j] = zero;
        }
      }
    }
    for (int j = 0; j < nv; j++) {
      float p[W];
      F_STOREU(p, part[j]);
      for (int l = 0; l < W && W * j + l < m; l++) acc[W * j + l] += p[l];
    }
    fan_write(src, dst0, dd, r0, m, acc, da, out, ostride);
  }
}

#if FAN_SIDDON
// fan_siddon is Siddon's path for a fan of n rays from src to dst0 + i*dd
// with dd along z, WD rays at a time in the lanes of a vector. The rays
// share their x and y at every a, so the crossings with the x and y planes
// are merged once for the fan (seg: a list of the segments between them,
// each in one x-y column of voxels); each ray then walks its own z
// crossings within each segment, mostly none or one.
static void SFX(fan_siddon)(const tl_volume *vol, const double *src, const double *dst0, const double *dd, int64_t n,
                            float *out, int64_t ostride, double *seg, int64_t *cell) {
  const double d2[3] = {dst0[0] - src[0], dst0[1] - src[1], 0};
  double amin, amax;
  const int64_t nseg = fan_segments(vol, src, d2, seg, cell, &amin, &amax);
  const double oz = vol->o[2], sz = vol->s[2], inv = 1 / sz;
  const int64_t nz = vol->n[2];
  const float *v = vol->v;
  const VD zero = D_ZERO(), inf = D_SET1(INFINITY);
  const VD zs = D_SET1((src[2] - oz) * inv);
  const KT kmax = K_SET1(nz - 1);
  for (int64_t r0 = 0; r0 < n; r0 += SIDDON_RAYS) {
    // A chunk of up to SIDDON_RAYS rays, WD per vector; per vector its
    // rays' z steps, their a ranges inside the volume, and their sums.
    const int m = n - r0 < SIDDON_RAYS ? (int)(n - r0) : SIDDON_RAYS;
    const int nv = SIDDON_RAYS == WD ? 1 : (m + WD - 1) / WD; // a chunk of one vector says so to the compiler
    VD vlo[SIDDON_RAYS / WD], vhi[SIDDON_RAYS / WD], base[SIDDON_RAYS / WD], inc[SIDDON_RAYS / WD];
    VD zd[SIDDON_RAYS / WD], sum[SIDDON_RAYS / WD];
    KT kstep[SIDDON_RAYS / WD];
    MD live[SIDDON_RAYS / WD], up[SIDDON_RAYS / WD], down[SIDDON_RAYS / WD], level[SIDDON_RAYS / WD];
    double len[SIDDON_RAYS], dzmin = INFINITY, dzmax = -INFINITY;
    for (int j = 0; j < nv; j++) {
      double dz[WD], lo[WD], hi[WD], livef[WD];
      for (int l = 0; l < WD; l++) {
        const int i = WD * j + l;
        dz[l] = i < m ? dst0[2] + (double)(r0 + i) * dd[2] - src[2] : 0;
        if (i < m) len[i] = sqrt(d2[0] * d2[0] + d2[1] * d2[1] + dz[l] * dz[l]);
        lo[l] = amin;
        hi[l] = amax;
        livef[l] = 0;
        if (i >= m || nseg == 0) continue;
        if (fan_lane(vol, src, dz[l], amin, amax, &lo[l], &hi[l])) {
          livef[l] = 1;
          if (dz[l] < dzmin) dzmin = dz[l];
          if (dz[l] > dzmax) dzmax = dz[l];
        }
      }
      const VD vdz = D_LOADU(dz);
      live[j] = D_CMP(D_LOADU(livef), zero, _CMP_NEQ_OQ);
      vlo[j] = D_LOADU(lo);
      vhi[j] = D_LOADU(hi);
      up[j] = D_CMP(vdz, zero, _CMP_GT_OQ);
      down[j] = D_CMP(vdz, zero, _CMP_LT_OQ);
      level[j] = D_CMP(vdz, zero, _CMP_EQ_OQ);
      // Plane k of z is crossed at a = base + k*inc (as siddon()).
      base[j] = D_SET1(oz - src[2]) / vdz;
      inc[j] = D_SET1(sz) / vdz;
      zd[j] = vdz * D_SET1(inv);
      kstep[j] = K_BLEND(down[j], K_SET1(1), K_SET1(-1));
      sum[j] = zero;
    }
    const int64_t ns = dzmin <= dzmax ? nseg : 0; // no ray of the chunk is live: nothing to walk
    for (int64_t s = 0; s < ns; s++) {
      if (SIDDON_PREFETCH && s + FANPF < ns) {
        // Prefetch the z range the chunk reads FANPF segments ahead.
        const double a = seg[s + FANPF];
        const double za = ((src[2] + a * dzmin) - oz) * inv, zb = ((src[2] + a * dzmax) - oz) * inv;
        const int64_t zlo = za < 0 ? 0 : (za > nz - 1 ? nz - 1 : (int64_t)za);
        const int64_t zhi = zb < 0 ? 0 : (zb > nz - 1 ? nz - 1 : (int64_t)zb);
        const float *q = v + cell[s + FANPF];
        for (int64_t z = zlo & ~15; z <= zhi; z += 16) TL_PREFETCH(q + z);
      }
      const VD s0 = D_SET1(seg[s]), s1 = D_SET1(seg[s + 1]);
      const float *cp = v + cell[s];
      for (int j = 0; j < nv; j++) {
        VD b0 = D_MAX(s0, vlo[j]), b1 = D_MIN(s1, vhi[j]);
        MD on = MD_AND(live[j], D_CMP(b0, b1, _CMP_LT_OQ));
        if (MD_NONE(on)) continue;
        // The z voxel at b0: the one the ray is in just after b0.
        KT k = SFX(voxel_at)(D_FMADD(b0, zd[j], zs), down[j], kmax);
        const MD upj = up[j], levelj = level[j];
        const VD incj = inc[j], basej = base[j];
        VD acc = sum[j];
        for (;;) {
          // The next z plane: k+1 going up, k going down; none if level.
          const VD an = D_BLEND(levelj, D_FMADD(SFX(plane)(k, upj), incj, basej), inf);
          // Never behind b0: for a ray nearly level on a plane, rounding
          // can put the crossing before it.
          const VD e = D_MAX(D_MIN(an, b1), b0);
          acc = SFX(add_voxel)(acc, on, e - b0, cp, k, nz);
          k = K_ADD(k, kstep[j]);
          on = MD_AND(on, MD_AND(D_CMP(an, b1, _CMP_LT_OQ), SFX(inside)(k, kmax)));
          if (MD_NONE(on)) break;
          b0 = e;
        }
        sum[j] = acc;
      }
    }
    for (int j = 0; j < nv; j++) {
      double acc[WD];
      D_STOREU(acc, sum[j]);
      for (int l = 0; l < WD && WD * j + l < m; l++)
        out[(r0 + WD * j + l) * ostride] = (float)(acc[l] * len[WD * j + l]);
    }
  }
}
#endif
