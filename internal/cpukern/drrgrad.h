// Line integrals of a voxel volume with their derivatives, see drrgrad.c.
#ifndef TAPELOOP_DRRGRAD_H
#define TAPELOOP_DRRGRAD_H
#include <stdint.h>

// tl_drr_grad sets out[r] to the line integral of tl_drr (same volume,
// rays, step and lref; in double) and, when gsrc and gdst are not NULL,
// gsrc[3r:3r+3] and gdst[3r:3r+3] to its derivatives with respect to the
// ray's source and end point, each sample's weight and the segment's
// length held fixed.
void tl_drr_grad(const float *v, const int64_t *n, const double *o, const double *s, int padded, int64_t nrays,
                 const double *src, const double *dst, double *out, double *gsrc, double *gdst, double step,
                 double lref);

// tl_drr_backproject adds sum_r g[r] * d out[r] / d v to grad (n[0]*n[1]*n[2]
// doubles, v's layout): the adjoint of tl_drr_grad's map from the volume's
// values to the line integrals.
void tl_drr_backproject(const int64_t *n, const double *o, const double *s, int padded, int64_t nrays,
                        const double *src, const double *dst, const double *g, double *grad, double step,
                        double lref);
#endif
