/*
 * tapeloop's C ABI: the library that `pip install ./python` and `make
 * python` build (tapeloop/libtapeloop.so, from ./capi), for C and other callers
 * besides the Python package. tl_version reports TAPELOOP_ABI, tl_release
 * the tapeloop release (tapeloop --version).
 *
 * Every function but tl_free returns NULL on success, or an error message
 * (one line, UTF-8) that the caller frees with tl_free; a message that
 * begins "interrupted: " says the call was stopped by SIGINT or
 * tl_interrupt. Handles are positive integers. A caller's buffers are read
 * and written only during the call that receives them and are never kept;
 * the data given at creation (a table, a volume) is copied. A config is a
 * JSON object of the CLI's flags for the workload plus the engine's
 * (device, gpu, batch, mem_limit, dtype); docs/python.md lists them.
 *
 * capi/header_test.go checks these prototypes against the functions the
 * library exports, and python/tests/test_abi.py the Python package's
 * ctypes table against them.
 */
#ifndef TAPELOOP_H
#define TAPELOOP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TAPELOOP_ABI "tapeloop-capi 6"

/* The library. */
char *tl_version(char *buf, int64_t n);   /* the ABI version into buf (n bytes with the NUL) */
char *tl_release(char *buf, int64_t n);   /* the tapeloop release it was built from ("0.1.0"), as tl_version */
char *tl_build(char *buf, int64_t n);     /* the GPU backend of the build ("none": CPU only) */
void tl_free(char *p);                    /* frees a message or text from any tl_ function */
char *tl_selftest(int kind);              /* kind 1: a panic inside, returned as an error */
char *tl_options(char *workload, char **text); /* a workload's options (key, flag, default), other defaults and limits, as JSON */

/* Any compiled object. */
char *tl_close(int64_t h);                /* releases h, waiting for a call in progress */
char *tl_interrupt(int64_t h);            /* stops the call in progress on h, if any, from another thread */
char *tl_dot(int64_t h, char **text);     /* the compiled graph as Graphviz DOT */
char *tl_report(int64_t h, char **text);  /* the calls' telemetry as JSON */

/* interp: M cubic interpolants on a shared grid, evaluated at query points.
   run: x of size bytes a value (4 float32, 8 float64; a float32 program
   takes float64 x too, placed on the grid before it is rounded), out of the
   program's size (tl_interp_shape). */
char *tl_interp_create(char *config, double *f, int64_t m, int64_t g, int64_t *handle);
char *tl_interp_shape(int64_t h, int64_t *batch, int64_t *cols, int64_t *size);
char *tl_interp_run(int64_t h, void *x, int64_t n, void *out, int64_t outLen, int64_t size, int interruptible);
/* grad: given up, the gradient of a cost with respect to run's out for the
   n queries x (upLen values of the program's size), dx (n values of the
   program's size) receives the cost's gradient with respect to each query
   and df (valuesLen = M*G doubles, row-major) with respect to the table's
   values; x of size bytes a value, as in run. Not for a formula reduction. */
char *tl_interp_grad(int64_t h, void *x, int64_t n, void *up, int64_t upLen, void *dx, double *df, int64_t valuesLen, int64_t size);

/* affinity: pairwise affinities of images (size: 4 float32, 8 float64). */
char *tl_affinity_create(char *config, int64_t *handle);
char *tl_affinity_run(int64_t h, void *x, int64_t xLen, void *y, int64_t yLen, void *out, int64_t *idx, double *vals, int64_t outLen, int64_t size, int interruptible);

/* drr: radiographs of a float32 (nx, ny, nz) volume; a pose is 14 doubles. */
char *tl_drr_create(char *config, float *v, int64_t nx, int64_t ny, int64_t nz, int64_t *handle);
char *tl_drr_orbit(int64_t h, int64_t n, double sdd, double sid, double pixel, double *iso, double start, double *axis, double *poses, int64_t length);
/* run: *warnings receives the call's own warnings, a line each (free with
   tl_free), or NULL when it has none or fails. */
char *tl_drr_run(int64_t h, double *poses, int64_t length, float *out, int64_t outLen, char **warnings, int interruptible);

/* register: 2D/3D registration of a DRR's volume (h: the DRR's handle).
   transform: a transform.json's text read for that volume: its six
   parameters (rotation vector in radians, translation in mm) and centre.
   create: the loss between the DRRs of the volume moved by a rigid
   transform and targets (n poses of 14 doubles, n·rows·cols doubles),
   compiled once. eval: the loss at six parameters and its gradient. run:
   a registration from init, *result its outcome as JSON (free with
   tl_free). */
char *tl_register_transform(int64_t h, char *text, double *params, double *center);
char *tl_register_create(int64_t h, char *config, double *poses, int64_t length, double *targets, int64_t tlen, int64_t *handle);
char *tl_register_eval(int64_t h, double *params, double *loss, double *grad, int interruptible);
char *tl_register_run(int64_t h, double *init, char **result, int interruptible);

/* wavelet: a volume convolved with the hat for every (theta, phi, xi). */
char *tl_wavelet_create(char *config, float *v, int64_t nx, int64_t ny, int64_t nz, int64_t *handle);
char *tl_wavelet_columns(int64_t h, char **text);
char *tl_wavelet_run(int64_t h, double *theta, int64_t nt, double *phi, int64_t np, double *xi, int64_t nxi, int64_t lo, int64_t hi, double *out, int64_t outLen, int interruptible);
char *tl_wavelet_response(int64_t h, double theta, double phi, double xi, float *out, int64_t outLen, int interruptible);

#ifdef __cplusplus
}
#endif

#endif /* TAPELOOP_H */
