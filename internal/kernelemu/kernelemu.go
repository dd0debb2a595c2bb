// Package kernelemu runs CUDA C kernels on the CPU, without a GPU: the
// one harness behind the emulated driver of package cuda (build tag
// tapeloop_cudaemu) and the tests that run kernels on machines without a
// GPU.
//
// A Program is CUDA C compiled with g++ against emu.h
// (each block's threads are fibers run in turn on the launching thread,
// __syncthreads a switch to the next until all have reached it,
// __shared__ arrays statics) into a shared library and loaded into the
// process. Its kernels are found by their extern "C" __global__
// signatures, and a launch passes each argument as the 8-byte word
// cuLaunchKernel would be given (every tapeloop kernel parameter is a
// pointer, an integer or a double). Kernels returns the Program of the
// *.cu files it is given (the GPU backend gives it cuda/kernels'), Compile
// one of sources given as text (the kernels written for users' formulas
// at run time). The libraries are kept in the user's
// cache directory under a hash of what went into them, so that a process
// compiles only what no process compiled before.
//
// The emulator checks a kernel's arithmetic, indexing and arguments, not
// its speed or a GPU's rounding.
package kernelemu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*tl_emu_launch_fn)(const char *, unsigned, unsigned, unsigned, const uint64_t *, int);

static int tl_emu_call(void *f, const char *k, unsigned gx, unsigned gy, unsigned block, const uint64_t *words, int nargs) {
	return ((tl_emu_launch_fn)f)(k, gx, gy, block, words, nargs);
}
*/
import "C"

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// emuH is the header every Program is compiled against: CUDA's built-in
// variables, __syncthreads and the launch of a grid, its threads as fibers.
//
//go:embed emu.h
var emuH []byte

// ErrNoCompiler is returned where g++ is not installed.
var ErrNoCompiler = errors.New("kernelemu: g++ not installed")

// cxxFlags compile every Program, after an optimisation level: -O2 for
// Kernels' (the GPU backend's), which the emulated driver runs on whole workloads, -O1 for
// Compile's, which compile in half the time and run on test-sized data.
// Hidden visibility keeps each library's kernels and emulator state its
// own; only tl_emu_launch is exported.
// _FORTIFY_SOURCE is turned off because its checked longjmp refuses the
// switch between a fiber's stack and the launcher's.
var cxxFlags = []string{"-std=c++20", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-gnu-unique", "-U_FORTIFY_SOURCE"}

// Program is compiled kernels, loaded.
type Program struct {
	params map[string]int // each kernel's number of parameters
	launch unsafe.Pointer // tl_emu_launch
}

// source is a file of a Program: its name in the build directory and its
// text.
type source struct{ name, text string }

var (
	kernelsMu sync.Mutex
	kernelsOf = map[string]*Program{} // by the sources' names and texts
)

// Kernels returns the Program of the *.cu files at the top of src (the
// GPU backend's are cuda/kernels' Sources), compiled once per process for
// the same files.
func Kernels(src fs.FS) (*Program, error) {
	files, err := fs.Glob(src, "*.cu")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("kernelemu: no *.cu files given")
	}
	var srcs []source
	for _, f := range files {
		b, err := fs.ReadFile(src, f)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, source{f, string(b)})
	}
	key := strings.Join(names(srcs), "\x00")
	kernelsMu.Lock()
	defer kernelsMu.Unlock()
	if p, ok := kernelsOf[key]; ok {
		return p, nil
	}
	p, err := build("-O2", srcs)
	if err != nil {
		return nil, err
	}
	kernelsOf[key] = p
	return p, nil
}

// Compile returns a Program of srcs, each CUDA C with its kernels declared
// extern "C" __global__; sources given more than once count once.
func Compile(srcs ...string) (*Program, error) {
	var files []source
	for _, s := range srcs {
		if !slices.ContainsFunc(files, func(f source) bool { return f.text == s }) {
			files = append(files, source{fmt.Sprintf("src%d.cu", len(files)), s})
		}
	}
	return build("-O1", files)
}

// Kernels lists the Program's kernels, sorted.
func (p *Program) Kernels() []string {
	return slices.Sorted(maps.Keys(p.params))
}

const maxDim = 1<<31 - 1 // bounds a launch's grid and block, as C's unsigned takes them

var launchMu sync.Mutex // the emulator's state is per library and global: one launch at a time

// Launch runs kernel name over gx×gy blocks of block threads, with the
// arguments as 8-byte words (pointers into C memory, integers, the bits
// of doubles), and returns when every block has run.
func (p *Program) Launch(name string, gx, gy, block int, words []uint64) error {
	n, ok := p.params[name]
	if !ok {
		return fmt.Errorf("kernelemu: no kernel %q", name)
	}
	if len(words) != n {
		return fmt.Errorf("kernelemu: %d arguments do not match the %d parameters of %s", len(words), n, name)
	}
	if gx < 1 || gy < 1 || block < 1 || gx > maxDim || gy > maxDim || block > maxDim {
		return fmt.Errorf("kernelemu: %s: launch of %d×%d blocks of %d threads", name, gx, gy, block)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var w *C.uint64_t
	if len(words) > 0 {
		w = (*C.uint64_t)(unsafe.Pointer(&words[0]))
	}
	launchMu.Lock()
	r := C.tl_emu_call(p.launch, cname, C.uint(gx), C.uint(gy), C.uint(block), w, C.int(len(words)))
	launchMu.Unlock()
	switch r {
	case 0:
		return nil
	case -3:
		return fmt.Errorf("kernelemu: %s: no memory for the stacks of a block's %d threads", name, block)
	}
	return fmt.Errorf("kernelemu: %s: the launch failed (%d)", name, int(r))
}

const guardBytes = 4096 // around each buffer of Run

// Run launches kernel name like Launch, with arguments as Go values: each
// an int64, a float64, or a buffer ([]float32, []float64, []int32,
// []int64, []byte), standing for a device pointer to its first element.
// Buffers are copied into C memory between two guard zones and back out
// after the kernel, so a kernel's writes land in them; a write into a
// guard zone (out of bounds, up to 4 KiB either side) fails the launch.
func (p *Program) Run(name string, gx, gy, block int, args ...any) error {
	words := make([]uint64, len(args))
	type buf struct {
		host []byte
		mem  unsafe.Pointer
	}
	var bufs []buf
	defer func() {
		for _, b := range bufs {
			C.free(b.mem)
		}
	}()
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			words[i] = uint64(v)
		case float64:
			words[i] = math.Float64bits(v)
		default:
			host, ok := bytesOf(a)
			if !ok {
				return fmt.Errorf("kernelemu: %s: argument %d is a %T", name, i, a)
			}
			mem := C.malloc(C.size_t(len(host) + 2*guardBytes))
			if mem == nil {
				return fmt.Errorf("kernelemu: %s: out of memory for argument %d", name, i)
			}
			bufs = append(bufs, buf{host, mem})
			m := unsafe.Slice((*byte)(mem), len(host)+2*guardBytes)
			copy(m, guardPattern)
			copy(m[guardBytes:], host)
			copy(m[guardBytes+len(host):], guardPattern)
			words[i] = uint64(uintptr(mem)) + guardBytes
		}
	}
	if err := p.Launch(name, gx, gy, block, words); err != nil {
		return err
	}
	for i, b := range bufs {
		m := unsafe.Slice((*byte)(b.mem), len(b.host)+2*guardBytes)
		if !bytes.Equal(m[:guardBytes], guardPattern) || !bytes.Equal(m[guardBytes+len(b.host):], guardPattern) {
			return fmt.Errorf("kernelemu: %s wrote outside buffer %d (%d bytes)", name, i, len(b.host))
		}
		copy(b.host, m[guardBytes:])
	}
	return nil
}

var guardPattern = bytes.Repeat([]byte{0xa5}, guardBytes)

// bytesOf views a buffer argument of Run as bytes.
func bytesOf(a any) ([]byte, bool) {
	switch v := a.(type) {
	case []float32:
		return asBytes(v), true
	case []float64:
		return asBytes(v), true
	case []int32:
		return asBytes(v), true
	case []int64:
		return asBytes(v), true
	case []byte:
		return v, true
	}
	return nil, false
}

func asBytes[T float32 | float64 | int32 | int64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// kernel is a kernel's name and its parameters' C types.
type kernel struct {
	name   string
	params []string
}

var (
	commentRE = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	boundsRE  = regexp.MustCompile(`__launch_bounds__\s*\([^)]*\)`)
	kernelRE  = regexp.MustCompile(`extern\s+"C"\s+__global__\s+void\s+(?:\w+\s+)*(\w+)\s*\(([^)]*)\)`)
	paramRE   = regexp.MustCompile(`^(.*?)\s*\b(\w+)$`)
)

// parseKernels finds the kernels src declares extern "C" __global__.
func parseKernels(src string) ([]kernel, error) {
	src = boundsRE.ReplaceAllString(commentRE.ReplaceAllString(src, ""), "")
	var ks []kernel
	for _, m := range kernelRE.FindAllStringSubmatch(src, -1) {
		k := kernel{name: m[1]}
		list := strings.TrimSpace(m[2])
		if list != "" && list != "void" {
			for _, p := range strings.Split(list, ",") {
				p = strings.Join(strings.Fields(p), " ")
				t := p
				if pm := paramRE.FindStringSubmatch(p); pm != nil && pm[1] != "" && !isTypeWord(pm[2]) {
					t = pm[1]
				}
				if argument(t, 0) == "" {
					return nil, fmt.Errorf("kernelemu: %s: parameter %q: the emulator passes pointers, integers and doubles", k.name, p)
				}
				k.params = append(k.params, t)
			}
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// isTypeWord reports whether w ends a type rather than names a parameter
// (an unnamed parameter: "long").
func isTypeWord(w string) bool {
	switch w {
	case "long", "int", "unsigned", "double", "short", "char", "size_t":
		return true
	}
	return false
}

// argument is the C expression that reads argument i, of C type t, from
// the launch's words, or "" for a type the emulator cannot pass.
func argument(t string, i int) string {
	switch {
	case strings.Contains(t, "*"):
		return fmt.Sprintf("(%s)Pa(%d)", t, i)
	case t == "double":
		return fmt.Sprintf("Da(%d)", i)
	}
	switch strings.TrimPrefix(strings.TrimPrefix(t, "const "), "unsigned ") {
	case "long", "long long", "long int", "long long int", "int", "unsigned", "size_t":
		return fmt.Sprintf("(%s)La(%d)", t, i)
	}
	return ""
}

// launcher follows the kernels in a Program's main file: the launch's
// words and their readers, a dispatch by name (dispatch), and the
// exported entry point.
const launcher = `
static const uint64_t *emu_words; // the launch's arguments (launches are serialised)
static void *Pa(int i) { return (void *)(uintptr_t)emu_words[i]; }
static long long La(int i) { return (long long)emu_words[i]; }
static double Da(int i) {
  double d;
  memcpy(&d, &emu_words[i], sizeof d);
  return d;
}
static int emu_dispatch(const char *k, unsigned gx, unsigned gy, unsigned block, int nargs);
extern "C" __attribute__((visibility("default"))) int tl_emu_launch(const char *k, unsigned gx, unsigned gy, unsigned block,
                                                                    const uint64_t *words, int nargs) {
  emu_words = words;
  try {
    return emu_dispatch(k, gx, gy, block, nargs);
  } catch (...) { // the stacks of the block's threads could not be mapped
    return -3;
  }
}
`

// build compiles srcs into a Program, or loads the library a process
// compiled from the same sources before.
func build(opt string, srcs []source) (*Program, error) {
	gxx, err := exec.LookPath(compiler())
	if err != nil {
		return nil, ErrNoCompiler
	}
	if err := sameTarget(gxx); err != nil {
		return nil, err
	}
	p := &Program{params: map[string]int{}}
	var main, dispatch strings.Builder
	main.WriteString("// The CUDA emulator's program (internal/kernelemu).\n#include <cstdint>\n#include <cstring>\n#include \"emu.h\"\n")
	dispatch.WriteString("static int emu_dispatch(const char *k, unsigned gx, unsigned gy, unsigned block, int nargs) {\n")
	for _, s := range srcs {
		fmt.Fprintf(&main, "#include %q\n", s.name)
		ks, err := parseKernels(s.text)
		if err != nil {
			return nil, err
		}
		for _, k := range ks {
			if _, ok := p.params[k.name]; ok {
				return nil, fmt.Errorf("kernelemu: two kernels named %s", k.name)
			}
			p.params[k.name] = len(k.params)
			var args []string
			for i, t := range k.params {
				args = append(args, argument(t, i))
			}
			fmt.Fprintf(&dispatch, "  if (!strcmp(k, %q)) {\n    if (nargs != %d) return -2;\n    emu_launch(gx, gy, block, [] { %s(%s); });\n    return 0;\n  }\n",
				k.name, len(k.params), k.name, strings.Join(args, ", "))
		}
	}
	dispatch.WriteString("  return -1;\n}\n")
	main.WriteString(launcher)
	main.WriteString(dispatch.String())

	version, err := exec.Command(gxx, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("kernelemu: %s --version: %v", gxx, err)
	}
	h := sha256.New()
	for _, part := range append([]string{gxx, string(version), opt, strings.Join(cxxFlags, " "), string(emuH), main.String()}, names(srcs)...) {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	lib := filepath.Join(libDir(), hex.EncodeToString(h.Sum(nil))[:32]+".so")
	if _, err := os.Stat(lib); err != nil {
		if err := compile(gxx, opt, lib, emuH, main.String(), srcs); err != nil {
			return nil, err
		}
	}
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	handle := C.dlopen(clib, C.RTLD_NOW|C.RTLD_LOCAL)
	if handle == nil {
		return nil, fmt.Errorf("kernelemu: loading %s: %s", lib, C.GoString(C.dlerror()))
	}
	sym := C.CString("tl_emu_launch")
	defer C.free(unsafe.Pointer(sym))
	if p.launch = C.dlsym(handle, sym); p.launch == nil {
		return nil, fmt.Errorf("kernelemu: %s has no tl_emu_launch", lib)
	}
	return p, nil
}

// names are the sources' names and texts, for the library's hash.
func names(srcs []source) []string {
	var s []string
	for _, f := range srcs {
		s = append(s, f.name, f.text)
	}
	return s
}

// compile writes the program's files to a temporary directory and
// compiles them into lib, through a temporary file renamed into place, so
// that processes compiling the same library at once all end with a
// whole one.
func compile(gxx, opt, lib string, emuH []byte, main string, srcs []source) error {
	dir, err := os.MkdirTemp("", "tapeloop-kernelemu-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files := map[string][]byte{"emu.h": emuH, "main.cc": []byte(main)}
	for _, s := range srcs {
		files[s.name] = []byte(s.text)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(lib), ".build-*.so")
	if err != nil {
		return fmt.Errorf("kernelemu: %v", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := append([]string{opt}, cxxFlags...)
	args = append(args, "-I", dir, "-o", tmp.Name(), filepath.Join(dir, "main.cc"))
	if out, err := exec.Command(gxx, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("kernelemu: compiling the kernels: %v\n%s", err, out)
	}
	if err := os.Rename(tmp.Name(), lib); err != nil {
		return fmt.Errorf("kernelemu: %v", err)
	}
	return nil
}

// compiler is the C++ compiler the kernels are built with: g++, or the
// one TAPELOOP_EMU_CXX names, such as aarch64-linux-gnu-g++ for a process
// of another architecture run under qemu-user (make test-arm64).
func compiler() string {
	if c := os.Getenv("TAPELOOP_EMU_CXX"); c != "" {
		return c
	}
	return "g++"
}

// gccArch is the first word of gcc's target triplet (-dumpmachine) for
// each GOARCH.
var gccArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "ppc64le": "powerpc64le",
	"riscv64": "riscv64", "s390x": "s390x", "loong64": "loongarch64"}

// sameTarget returns an error matching ErrNoCompiler unless gxx builds
// code for the architecture this process runs as: under qemu-user, the
// machine's own g++ builds a library the process cannot load.
func sameTarget(gxx string) error {
	out, err := exec.Command(gxx, "-dumpmachine").Output()
	if err != nil {
		return fmt.Errorf("kernelemu: %s -dumpmachine: %v", gxx, err)
	}
	machine := strings.TrimSpace(string(out))
	want, ok := gccArch[runtime.GOARCH]
	if !ok || strings.HasPrefix(machine, want+"-") || (runtime.GOARCH == "386" && strings.HasPrefix(machine, "i386-")) {
		return nil
	}
	return fmt.Errorf("%w for %s: %s builds for %s (TAPELOOP_EMU_CXX names another compiler)", ErrNoCompiler, runtime.GOARCH, gxx, machine)
}

// libDir is where the compiled libraries are kept: the user's cache
// directory, or the temporary directory where that cannot be made.
func libDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		d = filepath.Join(d, "tapeloop", "kernelemu")
		if os.MkdirAll(d, 0o755) == nil {
			return d
		}
	}
	d := filepath.Join(os.TempDir(), fmt.Sprintf("tapeloop-kernelemu-%d", os.Getuid()))
	os.MkdirAll(d, 0o700) // an error shows when the library is written
	return d
}
