//go:build tapeloop_cuda

package cuda

// cuBLAS, like cuFFT, is loaded at run time from the first of the known
// sonames that loads (TAPELOOP_CUBLAS names a file; TAPELOOP_CUDA_LIBDIR
// is searched first, and libcublasLt from there is loaded beside it).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*create_t)(void **);
typedef int (*mathmode_t)(void *, int);
typedef int (*sgemm_t)(void *, int, int, int, int, int, const float *, const float *, int, const float *, int,
                       const float *, float *, int);
typedef int (*setws_t)(void *, void *, size_t);
typedef int (*setstream_t)(void *, void *);

static create_t b_create;
static mathmode_t b_mathmode;
static sgemm_t b_sgemm;
static setws_t b_setws; // cublasSetWorkspace_v2: optional, absent before cuBLAS 11.4
static setstream_t b_setstream;

static int tl_cublas_load(const char *path) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) return 0;
	b_create = (create_t)dlsym(lib, "cublasCreate_v2");
	b_mathmode = (mathmode_t)dlsym(lib, "cublasSetMathMode");
	b_sgemm = (sgemm_t)dlsym(lib, "cublasSgemm_v2");
	b_setws = (setws_t)dlsym(lib, "cublasSetWorkspace_v2");
	b_setstream = (setstream_t)dlsym(lib, "cublasSetStream_v2");
	return b_create && b_mathmode && b_sgemm && b_setstream;
}
static int tl_cublas_preload(const char *path) { return dlopen(path, RTLD_NOW | RTLD_GLOBAL) != 0; }
static int tl_cublas_create(uintptr_t *h) { void *p = 0; int r = b_create(&p); *h = (uintptr_t)p; return r; }
static int tl_cublas_mathmode(uintptr_t h, int mode) { return b_mathmode((void *)h, mode); }
// -1 when this cuBLAS cannot take a workspace from its caller.
static int tl_cublas_setws(uintptr_t h, uintptr_t ws, size_t bytes) {
	return b_setws ? b_setws((void *)h, (void *)ws, bytes) : -1;
}
static int tl_cublas_setstream(uintptr_t h, uintptr_t s) { return b_setstream((void *)h, (void *)s); }
// C (m×n, column-major, ldc) = op(A)·op(B), alpha 1, beta 0.
static int tl_cublas_sgemm(uintptr_t h, int ta, int tb, int m, int n, int k, uintptr_t a, int lda, uintptr_t b,
                           int ldb, uintptr_t c, int ldc) {
	const float one = 1, zero = 0;
	return b_sgemm((void *)h, ta, tb, m, n, k, &one, (const float *)a, lda, (const float *)b, ldb, &zero, (float *)c, ldc);
}
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

var (
	cublasOnce sync.Once
	cublasErr  error
)

var cublasSonames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}

func loadCUBLAS() error {
	cublasOnce.Do(func() {
		var dirs []string // cuBLAS needs cuBLASLt, from beside it when it is not on the loader's path
		if f := os.Getenv("TAPELOOP_CUBLAS"); f != "" {
			dirs = append(dirs, filepath.Dir(f))
		}
		if dir := os.Getenv("TAPELOOP_CUDA_LIBDIR"); dir != "" {
			dirs = append(dirs, dir)
		}
		for _, dir := range dirs {
			for _, s := range cublasSonames {
				cs := C.CString(filepath.Join(dir, "libcublasLt"+strings.TrimPrefix(s, "libcublas")))
				C.tl_cublas_preload(cs)
				C.free(unsafe.Pointer(cs))
			}
		}
		cublasErr = loadFirst("cuBLAS", "TAPELOOP_CUBLAS", cublasSonames, func(path *C.char) bool { return C.tl_cublas_load(path) != 0 })
	})
	return cublasErr
}

// cuBLAS math modes: the default (full float32), or TF32 tensor cores.
const (
	mathDefault = 0
	mathTF32    = 3
)

// NewBLAS creates a handle; tf32 lets GEMMs use TF32 tensor cores (about
// 1e-3 relative per product, summed in float32). With ws ≠ 0 the handle
// works in the wsBytes at ws (from an arena, so that --mem-limit bounds
// it) instead of allocating its own; cuBLAS older than 11.4 cannot, and
// keeps its own.
func (d *Device) NewBLAS(tf32 bool, ws DevicePtr, wsBytes int64) (*BLAS, error) {
	if err := loadCUBLAS(); err != nil {
		return nil, err
	}
	b := &BLAS{dev: d, tf32: tf32}
	err := d.Do(func() error {
		var h C.uintptr_t
		if r := C.tl_cublas_create(&h); r != 0 {
			return fmt.Errorf("%w: cublasCreate: status %d", ErrDevice, int(r))
		}
		b.h = uintptr(h)
		mode := C.int(mathDefault)
		if tf32 {
			mode = mathTF32
		}
		if r := C.tl_cublas_mathmode(h, mode); r != 0 {
			return fmt.Errorf("%w: cublasSetMathMode: status %d", ErrDevice, int(r))
		}
		if ws != 0 {
			if r := C.tl_cublas_setws(h, C.uintptr_t(ws), C.size_t(wsBytes)); r > 0 {
				return fmt.Errorf("%w: cublasSetWorkspace: status %d", ErrDevice, int(r))
			}
		}
		return nil
	})
	return b, err
}

// GemmTN sets C (m×n, column-major, leading dimension ldc) to Aᵀ·B for A
// (k×m, lda) and B (k×n, ldb), all column-major float32 on the device, and
// waits for it. Row-major, that is C'(n×m) = B'·A'ᵀ: the dot products of
// B's rows with A's rows.
func (b *BLAS) GemmTN(m, n, k int, a DevicePtr, lda int, bb DevicePtr, ldb int, c DevicePtr, ldc int) error {
	return b.dev.timed(func() error { return b.gemmTN(b.dev.def, m, n, k, a, lda, bb, ldb, c, ldc) })
}

// GemmTNOn queues GemmTN's product on stream s without waiting for it.
func (b *BLAS) GemmTNOn(s *Stream, m, n, k int, a DevicePtr, lda int, bb DevicePtr, ldb int, c DevicePtr, ldc int) error {
	return b.dev.Do(func() error { return b.gemmTN(s, m, n, k, a, lda, bb, ldb, c, ldc) })
}

// gemmTN queues the product on s; it runs inside Do.
func (b *BLAS) gemmTN(s *Stream, m, n, k int, a DevicePtr, lda int, bb DevicePtr, ldb int, c DevicePtr, ldc int) error {
	if r := C.tl_cublas_setstream(C.uintptr_t(b.h), C.uintptr_t(uintptr(unsafe.Pointer(s.s.C())))); r != 0 {
		return fmt.Errorf("%w: cublasSetStream: status %d", ErrDevice, int(r))
	}
	if r := C.tl_cublas_sgemm(C.uintptr_t(b.h), 1, 0, C.int(m), C.int(n), C.int(k), C.uintptr_t(a), C.int(lda),
		C.uintptr_t(bb), C.int(ldb), C.uintptr_t(c), C.int(ldc)); r != 0 {
		return fmt.Errorf("%w: cublasSgemm: status %d", ErrDevice, int(r))
	}
	return nil
}
