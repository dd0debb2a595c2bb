// What drr.c and drr_fan.c share; not part of the package's C interface.
#ifndef TAPELOOP_DRR_INTERNAL_H
#define TAPELOOP_DRR_INTERNAL_H
#include "drr.h"
#include <stdint.h>

// tl_clip intersects the segment src + a*d, a in [0, 1], with the volume's
// box along its first axes axes; 0 when the ray misses it.
int tl_clip(const tl_volume *vol, const double *src, const double *d, int axes, double *amin, double *amax);

// tl_axis_start prepares Siddon's walk along axis ax from a = amin: the
// first plane crossing after amin, the distance between crossings, and the
// voxel index before it.
void tl_axis_start(const tl_volume *vol, int ax, const double *src, const double *d, double amin, double *next,
                   double *inc, int64_t *idx);

// tl_rays renders nrays rays given by their end points ray by ray (16 at a
// time for trilinear with AVX-512), writing out[r*ostride].
void tl_rays(const tl_volume *vol, int padded, int64_t nrays, const double *src, const double *dst, float *out,
             int64_t ostride, double step, double lref);
#endif
