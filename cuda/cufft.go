//go:build tapeloop_cuda

package cuda

// cuFFT is loaded at run time, not linked: the build machine's CUDA 11.8
// cuFFT is libcufft.so.10 while GPU machines may carry only 12 or 13, so
// the first of the known sonames that loads wins (TAPELOOP_CUFFT names a
// file, TAPELOOP_CUDA_LIBDIR a directory to look in first).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*create_t)(int *);
typedef int (*autoalloc_t)(int, int);
typedef int (*make3d_t)(int, int, int, int, int, size_t *);
typedef int (*workarea_t)(int, void *);
typedef int (*exec_t)(int, void *, void *);
typedef int (*destroy_t)(int);

static create_t p_create;
static autoalloc_t p_autoalloc;
static make3d_t p_make3d;
static workarea_t p_workarea;
static exec_t p_r2c, p_c2r;
static destroy_t p_destroy;

static int tl_cufft_load(const char *path) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) return 0;
	p_create = (create_t)dlsym(lib, "cufftCreate");
	p_autoalloc = (autoalloc_t)dlsym(lib, "cufftSetAutoAllocation");
	p_make3d = (make3d_t)dlsym(lib, "cufftMakePlan3d");
	p_workarea = (workarea_t)dlsym(lib, "cufftSetWorkArea");
	p_r2c = (exec_t)dlsym(lib, "cufftExecR2C");
	p_c2r = (exec_t)dlsym(lib, "cufftExecC2R");
	p_destroy = (destroy_t)dlsym(lib, "cufftDestroy");
	return p_create && p_autoalloc && p_make3d && p_workarea && p_r2c && p_c2r && p_destroy;
}

// Plans whose work area the caller provides (cufftSetAutoAllocation 0).
static int tl_cufft_plan(int *h, int n0, int n1, int n2, int type, size_t *work) {
	int r = p_create(h);
	if (r) return r;
	if ((r = p_autoalloc(*h, 0))) return r;
	return p_make3d(*h, n0, n1, n2, type, work);
}
static int tl_cufft_workarea(int h, uintptr_t p) { return p_workarea(h, (void *)p); }
static int tl_cufft_r2c(int h, uintptr_t in, uintptr_t out) { return p_r2c(h, (void *)in, (void *)out); }
static int tl_cufft_c2r(int h, uintptr_t in, uintptr_t out) { return p_c2r(h, (void *)in, (void *)out); }
static int tl_cufft_destroy(int h) { return p_destroy(h); }
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"
)

const (
	cufftR2C = 0x2a
	cufftC2R = 0x2c
)

var (
	cufftOnce sync.Once
	cufftErr  error
)

// cufftSonames are tried in order, newest first.
var cufftSonames = []string{"libcufft.so.13", "libcufft.so.12", "libcufft.so.11", "libcufft.so.10", "libcufft.so"}

func loadCUFFT() error {
	cufftOnce.Do(func() {
		cufftErr = loadFirst("cuFFT", "TAPELOOP_CUFFT", cufftSonames, func(path *C.char) bool { return C.tl_cufft_load(path) != 0 })
	})
	return cufftErr
}

// loadFirst tries the library file named by env, then each soname in
// TAPELOOP_CUDA_LIBDIR, then each soname on the loader's path, until load
// accepts one.
func loadFirst(what, env string, sonames []string, load func(path *C.char) bool) error {
	var tried []string
	if f := os.Getenv(env); f != "" {
		tried = append(tried, f)
	}
	if dir := os.Getenv("TAPELOOP_CUDA_LIBDIR"); dir != "" {
		for _, s := range sonames {
			tried = append(tried, filepath.Join(dir, s))
		}
	}
	tried = append(tried, sonames...)
	for _, f := range tried {
		cs := C.CString(f)
		ok := load(cs)
		C.free(unsafe.Pointer(cs))
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: cannot load %s (tried %v); set TAPELOOP_CUDA_LIBDIR to the directory holding it", ErrDevice, what, tried)
}

// NewFFT3 makes the plans; call SetWorkArea before executing them.
func (d *Device) NewFFT3(n0, n1, n2 int) (*FFT3, error) {
	if err := loadCUFFT(); err != nil {
		return nil, err
	}
	f := &FFT3{Dims: [3]int{n0, n1, n2}, dev: d}
	err := d.Do(func() error {
		var w1, w2 C.size_t
		if r := C.tl_cufft_plan((*C.int)(unsafe.Pointer(&f.r2c)), C.int(n0), C.int(n1), C.int(n2), cufftR2C, &w1); r != 0 {
			return fmt.Errorf("%w: cuFFT R2C plan %v: error %d", ErrDevice, f.Dims, int(r))
		}
		if r := C.tl_cufft_plan((*C.int)(unsafe.Pointer(&f.c2r)), C.int(n0), C.int(n1), C.int(n2), cufftC2R, &w2); r != 0 {
			return fmt.Errorf("%w: cuFFT C2R plan %v: error %d", ErrDevice, f.Dims, int(r))
		}
		f.Work = int64(max(w1, w2))
		return nil
	})
	return f, err
}

// SetWorkArea gives both plans the same work area (they never run at once).
func (f *FFT3) SetWorkArea(p DevicePtr) error {
	return f.dev.Do(func() error {
		for _, h := range []C.int{C.int(f.r2c), C.int(f.c2r)} {
			if r := C.tl_cufft_workarea(h, C.uintptr_t(p)); r != 0 {
				return fmt.Errorf("%w: cuFFT work area: error %d", ErrDevice, int(r))
			}
		}
		return nil
	})
}

// Forward queues the transform of the real array at in into the half
// spectrum at out (time it with Begin and End).
func (f *FFT3) Forward(in, out DevicePtr) error {
	return f.dev.Do(func() error {
		if r := C.tl_cufft_r2c(C.int(f.r2c), C.uintptr_t(in), C.uintptr_t(out)); r != 0 {
			return fmt.Errorf("%w: cuFFT R2C: error %d", ErrDevice, int(r))
		}
		return nil
	})
}

// Inverse queues the transform of the half spectrum at in (overwritten)
// into the real array at out, unnormalised.
func (f *FFT3) Inverse(in, out DevicePtr) error {
	return f.dev.Do(func() error {
		if r := C.tl_cufft_c2r(C.int(f.c2r), C.uintptr_t(in), C.uintptr_t(out)); r != 0 {
			return fmt.Errorf("%w: cuFFT C2R: error %d", ErrDevice, int(r))
		}
		return nil
	})
}

// Close destroys the plans.
func (f *FFT3) Close() error {
	return f.dev.Do(func() error {
		C.tl_cufft_destroy(C.int(f.r2c))
		C.tl_cufft_destroy(C.int(f.c2r))
		return nil
	})
}
