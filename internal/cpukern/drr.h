// Ray casting through a voxel volume, see drr.c.
#ifndef TAPELOOP_DRR_H
#define TAPELOOP_DRR_H
#include <stdint.h>

// A volume of nx*ny*nz float32 values in C order (index (i*ny + j)*nz + k);
// voxel (i, j, k) spans [o + (i, j, k)*s, o + (i+1, j+1, k+1)*s): o is the
// box's low corner (the Go side passes the centre of voxel 0 less half a
// voxel).
typedef struct {
  const float *v;
  int64_t n[3];
  double o[3], s[3];
} tl_volume;

// For nrays rays from src[3*r] to dst[3*r] (mm), out[r] = the line integral
// of the volume along the segment: exact (Siddon: sum over voxels of
// intersection length times value) when step <= 0, else the sum of
// trilinear samples (zero outside the volume) at the fractions
// (k + 1/2)*step/lref of the segment from the source, each weighing
// step*len/lref mm for a segment len mm long: the samples lie step mm apart
// on a ray lref mm long, closer on shorter ones. lref <= 0 takes each ray's
// own length: samples every step mm.
// The volume is given as v, n[3], its corner o[3] and spacing s[3]; padded
// says it carries a border of zero voxels (see volume.Pad), which lets the
// trilinear sampler skip its boundary tests.
void tl_drr(const float *v, const int64_t *n, const double *o, const double *s, int padded, int64_t nrays, const double *src,
            const double *dst, float *out, double step, double lref);

// A fan for tl_drr_fans: rays from src to dst0 + r*dd, r = 0 … n-1, written
// to out[off + r*stride], with lref as for tl_drr (cpukern.Fan in Go).
typedef struct {
  double src[3], dst0[3], dd[3];
  int64_t n, stride, off;
  double lref;
} tl_fan;

// tl_drr_fans renders nfans fans in one call. Fans whose end points step
// along z (dd[0] = dd[1] = 0) take the fan paths of drr_fan.c: Siddon's
// always, trilinear's in a padded volume.
void tl_drr_fans(const float *v, const int64_t *n, const double *o, const double *s, int padded, const tl_fan *fans,
                 int64_t nfans, float *out, double step);

// tl_fan_layout writes sizeof(tl_fan) and the offsets of dst0, n, off and
// lref, for Go to check its copy of the struct against.
void tl_fan_layout(int64_t *out);
#endif
