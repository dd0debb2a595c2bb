//go:build fftw

package fft3

// #cgo LDFLAGS: -lfftw3_threads -lfftw3 -lm -lpthread
// #include <fftw3.h>
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// FFTW's planner is not thread-safe; plans are made under this lock.
var (
	planMu      sync.Mutex
	threadsInit sync.Once
)

// Plan transforms arrays of fixed dimensions with FFTW plans made once
// (FFTW_ESTIMATE, unaligned, so any Go slice of the right length can be
// transformed with the new-array execute functions).
type Plan struct {
	Dims               [3]int
	fwd, bwd, r2c, c2r C.fftw_plan
}

// New returns a plan for n0×n1×n2 arrays.
func New(n0, n1, n2 int) *Plan {
	threadsInit.Do(func() { C.fftw_init_threads() })
	p := &Plan{Dims: [3]int{n0, n1, n2}}
	planMu.Lock()
	defer planMu.Unlock()
	C.fftw_plan_with_nthreads(C.int(runtime.GOMAXPROCS(0)))
	n := n0 * n1 * n2
	h := n0 * n1 * (n2/2 + 1)
	// Planning with FFTW_ESTIMATE does not touch the arrays: scratch of
	// the right sizes is enough.
	cin := (*C.fftw_complex)(C.fftw_malloc(C.size_t(16 * n)))
	rin := (*C.double)(C.fftw_malloc(C.size_t(8 * n)))
	cout := (*C.fftw_complex)(C.fftw_malloc(C.size_t(16 * max(h, 1))))
	defer C.fftw_free(unsafe.Pointer(cin))
	defer C.fftw_free(unsafe.Pointer(rin))
	defer C.fftw_free(unsafe.Pointer(cout))
	flags := C.uint(C.FFTW_ESTIMATE | C.FFTW_UNALIGNED)
	a, b, c := C.int(n0), C.int(n1), C.int(n2)
	p.fwd = C.fftw_plan_dft_3d(a, b, c, cin, cin, C.FFTW_FORWARD, flags)
	p.bwd = C.fftw_plan_dft_3d(a, b, c, cin, cin, C.FFTW_BACKWARD, flags)
	p.r2c = C.fftw_plan_dft_r2c_3d(a, b, c, rin, cout, flags)
	p.c2r = C.fftw_plan_dft_c2r_3d(a, b, c, cout, rin, flags)
	runtime.SetFinalizer(p, func(p *Plan) {
		planMu.Lock()
		defer planMu.Unlock()
		for _, pl := range []C.fftw_plan{p.fwd, p.bwd, p.r2c, p.c2r} {
			C.fftw_destroy_plan(pl)
		}
	})
	return p
}

// Len is the number of elements of an array.
func (p *Plan) Len() int { return p.Dims[0] * p.Dims[1] * p.Dims[2] }

// HalfLen is the number of complex coefficients of a real array's
// transform: n0·n1·(n2/2 + 1), the rest following by Hermitian symmetry.
func (p *Plan) HalfLen() int { return p.Dims[0] * p.Dims[1] * (p.Dims[2]/2 + 1) }

func cplx(x []complex128) *C.fftw_complex { return (*C.fftw_complex)(unsafe.Pointer(&x[0])) }

// Forward replaces x by its (unnormalised) discrete Fourier transform.
func (p *Plan) Forward(x []complex128) {
	if len(x) != p.Len() {
		panic("fft3: array length does not match the plan")
	}
	C.fftw_execute_dft(p.fwd, cplx(x), cplx(x))
}

// Inverse replaces x by its inverse transform, normalised so that Inverse
// undoes Forward.
func (p *Plan) Inverse(x []complex128) {
	if len(x) != p.Len() {
		panic("fft3: array length does not match the plan")
	}
	C.fftw_execute_dft(p.bwd, cplx(x), cplx(x))
	s := complex(1/float64(p.Len()), 0)
	for i := range x {
		x[i] *= s
	}
}

// ForwardReal transforms the real array x (n0·n1·n2 values) into dst
// (HalfLen coefficients, the last axis halved).
func (p *Plan) ForwardReal(dst []complex128, x []float64) {
	if len(x) != p.Len() || len(dst) != p.HalfLen() {
		panic("fft3: array lengths do not match the plan")
	}
	C.fftw_execute_dft_r2c(p.r2c, (*C.double)(unsafe.Pointer(&x[0])), cplx(dst))
}

// InverseReal turns HalfLen coefficients c of a real array's transform
// back into the array, normalised so that it undoes ForwardReal. It
// overwrites c.
func (p *Plan) InverseReal(dst []float64, c []complex128) {
	if len(dst) != p.Len() || len(c) != p.HalfLen() {
		panic("fft3: array lengths do not match the plan")
	}
	C.fftw_execute_dft_c2r(p.c2r, cplx(c), (*C.double)(unsafe.Pointer(&dst[0])))
	s := 1 / float64(p.Len())
	for i := range dst {
		dst[i] *= s
	}
}

// InverseRealCrop is InverseReal for callers that need only the block of
// dst at [lo, lo+n): FFTW computes all of it, the rest of dst is
// overwritten too.
func (p *Plan) InverseRealCrop(dst []float64, c []complex128, lo, n [3]int) {
	for a := range 3 {
		if lo[a] < 0 || n[a] < 0 || lo[a]+n[a] > p.Dims[a] {
			panic("fft3: crop outside the array")
		}
	}
	p.InverseReal(dst, c)
}
