// Package nvrtc compiles CUDA C to PTX at run time with NVIDIA's NVRTC
// library, loaded with dlopen on first use: nothing links against it, so
// a binary that never compiles a kernel runs where it is missing. It needs
// no GPU; the GPU flavour (package cuda) loads its PTX into a context.
//
// The library is the first of TAPELOOP_NVRTC (a file), then
// libnvrtc.so.13, .12, .11.2 and libnvrtc.so in TAPELOOP_CUDA_LIBDIR, then
// the same sonames on the loader's path. libnvrtc-builtins, which NVRTC
// opens itself, is loaded first from the same directory, so that a
// library outside the loader's path (a Python package's) works.
package nvrtc

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef int (*version_t)(int *, int *);
typedef int (*create_t)(void **, const char *, const char *, int, const char *const *, const char *const *);
typedef int (*compile_t)(void *, int, const char *const *);
typedef int (*size_t_t)(void *, size_t *);
typedef int (*get_t)(void *, char *);
typedef int (*destroy_t)(void **);
typedef const char *(*errstr_t)(int);
typedef int (*narch_t)(int *);
typedef int (*archs_t)(int *);

static version_t n_version;
static create_t n_create;
static compile_t n_compile;
static size_t_t n_logsize, n_ptxsize;
static get_t n_log, n_ptx;
static destroy_t n_destroy;
static errstr_t n_errstr;
static narch_t n_narch; // nvrtcGetNumSupportedArchs: NVRTC 11.2 on
static archs_t n_archs;

static int tl_nvrtc_preload(const char *path) { return dlopen(path, RTLD_NOW | RTLD_GLOBAL) != 0; }

static int tl_nvrtc_load(const char *path) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) return 0;
	n_version = (version_t)dlsym(lib, "nvrtcVersion");
	n_create = (create_t)dlsym(lib, "nvrtcCreateProgram");
	n_compile = (compile_t)dlsym(lib, "nvrtcCompileProgram");
	n_logsize = (size_t_t)dlsym(lib, "nvrtcGetProgramLogSize");
	n_log = (get_t)dlsym(lib, "nvrtcGetProgramLog");
	n_ptxsize = (size_t_t)dlsym(lib, "nvrtcGetPTXSize");
	n_ptx = (get_t)dlsym(lib, "nvrtcGetPTX");
	n_destroy = (destroy_t)dlsym(lib, "nvrtcDestroyProgram");
	n_errstr = (errstr_t)dlsym(lib, "nvrtcGetErrorString");
	n_narch = (narch_t)dlsym(lib, "nvrtcGetNumSupportedArchs");
	n_archs = (archs_t)dlsym(lib, "nvrtcGetSupportedArchs");
	return n_version && n_create && n_compile && n_logsize && n_log && n_ptxsize && n_ptx && n_destroy && n_errstr;
}

static int tl_nvrtc_version(int *major, int *minor) { return n_version(major, minor); }
static const char *tl_nvrtc_errstr(int r) { return n_errstr(r); }

static int tl_nvrtc_narch(int *n) {
	if (!n_narch || !n_archs) return -1;
	return n_narch(n);
}
static int tl_nvrtc_archs(int *a) { return n_archs(a); }

// tl_nvrtc_compile compiles src; *prog is left for the log and the PTX.
static int tl_nvrtc_compile(void **prog, const char *src, const char *name, int nopt, const char *const *opts) {
	int r = n_create(prog, src, name, 0, 0, 0);
	if (r != 0) return -1000 - r;
	return n_compile(*prog, nopt, opts);
}
static int tl_nvrtc_logsize(void *prog, size_t *n) { return n_logsize(prog, n); }
static int tl_nvrtc_log(void *prog, char *buf) { return n_log(prog, buf); }
static int tl_nvrtc_ptxsize(void *prog, size_t *n) { return n_ptxsize(prog, n); }
static int tl_nvrtc_ptx(void *prog, char *buf) { return n_ptx(prog, buf); }
static void tl_nvrtc_destroy(void **prog) { if (*prog) n_destroy(prog); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unsafe"
)

// ErrNVRTC is wrapped by every error of the package.
var ErrNVRTC = errors.New("nvrtc")

// Sonames are the names the library is looked for by, newest first.
var Sonames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}

var (
	loadOnce sync.Once
	loadErr  error
	mu       sync.Mutex // one compilation at a time
)

// Load loads the library, once; it tells why when it cannot.
func Load() error {
	loadOnce.Do(func() {
		var tried []string
		if f := os.Getenv("TAPELOOP_NVRTC"); f != "" {
			tried = append(tried, f)
			preloadBuiltins(filepath.Dir(f))
		}
		if dir := os.Getenv("TAPELOOP_CUDA_LIBDIR"); dir != "" {
			preloadBuiltins(dir)
			for _, s := range Sonames {
				tried = append(tried, filepath.Join(dir, s))
			}
		}
		tried = append(tried, Sonames...)
		for _, f := range tried {
			cs := C.CString(f)
			ok := C.tl_nvrtc_load(cs) != 0
			C.free(unsafe.Pointer(cs))
			if ok {
				return
			}
		}
		loadErr = fmt.Errorf("%w: cannot load libnvrtc (tried %v); set TAPELOOP_CUDA_LIBDIR to the directory holding it",
			ErrNVRTC, tried)
	})
	return loadErr
}

// preloadBuiltins loads dir's libnvrtc-builtins, which libnvrtc opens by
// its soname and finds then among the loaded libraries.
func preloadBuiltins(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so*"))
	for _, f := range files {
		cs := C.CString(f)
		C.tl_nvrtc_preload(cs)
		C.free(unsafe.Pointer(cs))
	}
}

// Version is the library's version, as 12, 4.
func Version() (major, minor int, err error) {
	if err := Load(); err != nil {
		return 0, 0, err
	}
	var a, b C.int
	if r := C.tl_nvrtc_version(&a, &b); r != 0 {
		return 0, 0, fmt.Errorf("%w: nvrtcVersion: %s", ErrNVRTC, errString(r))
	}
	return int(a), int(b), nil
}

// Archs lists the compute capabilities the library compiles for, as
// 10·major + minor (80 for 8.0), ascending; nil from a library too old to
// tell (before 11.2).
func Archs() ([]int, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	var n C.int
	if r := C.tl_nvrtc_narch(&n); r != 0 || n <= 0 {
		return nil, nil
	}
	a := make([]C.int, n)
	if r := C.tl_nvrtc_archs(&a[0]); r != 0 {
		return nil, fmt.Errorf("%w: nvrtcGetSupportedArchs: %s", ErrNVRTC, errString(r))
	}
	out := make([]int, n)
	for i, v := range a {
		out[i] = int(v)
	}
	sort.Ints(out)
	return out, nil
}

// ArchFor is the virtual architecture option for a device of compute
// capability cc (10·major + minor): the newest the library knows that is
// not newer than the device, as "--gpu-architecture=compute_90". PTX for it runs
// on the device (the driver compiles it for the device at load).
func ArchFor(cc int) (string, error) {
	archs, err := Archs()
	if err != nil {
		return "", err
	}
	best := cc
	if archs != nil {
		best = -1
		for _, a := range archs {
			if a <= cc {
				best = a
			}
		}
		if best < 0 {
			return "", fmt.Errorf("%w: this libnvrtc compiles for compute capabilities %d.%d to %d.%d, not for %d.%d",
				ErrNVRTC, archs[0]/10, archs[0]%10, archs[len(archs)-1]/10, archs[len(archs)-1]%10, cc/10, cc%10)
		}
	}
	return fmt.Sprintf("--gpu-architecture=compute_%d", best), nil
}

// Compile compiles src (name is the file name messages give) with the
// NVRTC options opts and returns its PTX. A failed compilation's error
// holds NVRTC's log.
func Compile(src, name string, opts []string) (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	mu.Lock()
	defer mu.Unlock()
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	copts := make([]*C.char, len(opts)+1)
	for i, o := range opts {
		copts[i] = C.CString(o)
		defer C.free(unsafe.Pointer(copts[i]))
	}
	var prog unsafe.Pointer
	defer C.tl_nvrtc_destroy(&prog)
	r := C.tl_nvrtc_compile(&prog, csrc, cname, C.int(len(opts)), (**C.char)(unsafe.Pointer(&copts[0])))
	if r <= -1000 {
		return "", fmt.Errorf("%w: nvrtcCreateProgram: %s", ErrNVRTC, errString(-1000-r))
	}
	if r != 0 {
		return "", fmt.Errorf("%w: compiling %s: %s\n%s", ErrNVRTC, name, errString(r), strings.TrimSpace(programLog(prog)))
	}
	var n C.size_t
	if r := C.tl_nvrtc_ptxsize(prog, &n); r != 0 {
		return "", fmt.Errorf("%w: nvrtcGetPTXSize: %s", ErrNVRTC, errString(r))
	}
	buf := make([]byte, n+1)
	if r := C.tl_nvrtc_ptx(prog, (*C.char)(unsafe.Pointer(&buf[0]))); r != 0 {
		return "", fmt.Errorf("%w: nvrtcGetPTX: %s", ErrNVRTC, errString(r))
	}
	return strings.TrimRight(string(buf), "\x00"), nil
}

func programLog(prog unsafe.Pointer) string {
	var n C.size_t
	if C.tl_nvrtc_logsize(prog, &n) != 0 || n == 0 {
		return ""
	}
	buf := make([]byte, n+1)
	if C.tl_nvrtc_log(prog, (*C.char)(unsafe.Pointer(&buf[0]))) != 0 {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00")
}

func errString(r C.int) string { return C.GoString(C.tl_nvrtc_errstr(r)) }
