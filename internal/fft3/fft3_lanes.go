package fft3

// #cgo CFLAGS: -O3 -std=gnu11 -Wno-psabi
// #cgo LDFLAGS: -lm
// #include "lanes.h"
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/tapeloop/tapeloop/internal/parallel"
)

// Work is handed to the goroutines in chunks of this many lines.
const chunkLines = 64

var maxISA = C.tl_lanes_isa()

// ISA names the instruction set the transforms use on this CPU:
// "avx512f", "avx2" or "sse2" on x86-64, "neon" on arm64, "generic"
// elsewhere.
func ISA() string { return C.GoString(C.tl_lanes_isa_name(maxISA)) }

// Plan transforms arrays of fixed dimensions. A plan may be used by one
// goroutine at a time; it parallelises each transform itself, with one
// scratch buffer (allocated once) per processor.
type Plan struct {
	Dims    [3]int
	isa     C.int
	c       [3]*C.tl_fft1 // complex lines along each axis
	r       *C.tl_fft1    // real lines along the last axis
	scratch chan []float32
	planes  *parallel.Buffers[complex64] // InverseRealCropWith's plane and row buffers
	flags   []bool                       // per plane of axis 0: all zero, or outside a crop
}

// New returns a plan for n0×n1×n2 arrays.
func New(n0, n1, n2 int) *Plan {
	p := &Plan{Dims: [3]int{n0, n1, n2}, isa: maxISA, flags: make([]bool, n0)}
	for a, n := range p.Dims {
		if n < 1 || n > 1<<30 {
			panic(fmt.Sprintf("fft3: dimension %d of %v", a, p.Dims))
		}
		p.c[a] = C.tl_fft1_new(C.int(n), 0)
	}
	p.r = C.tl_fft1_new(C.int(n2), 1)
	for _, f := range append(p.c[:], p.r) {
		if f == nil {
			panic("fft3: out of memory for twiddle tables")
		}
	}
	runtime.AddCleanup(p, func(fs [4]*C.tl_fft1) {
		for _, f := range fs {
			C.tl_fft1_free(f)
		}
	}, [4]*C.tl_fft1{p.c[0], p.c[1], p.c[2], p.r})
	procs := runtime.GOMAXPROCS(0)
	p.scratch = make(chan []float32, procs)
	p.planes = parallel.NewBuffers[complex64](procs)
	size := int(C.tl_lanes_scratch(C.int(max(n0, n1, n2))))
	for range procs {
		p.scratch <- make([]float32, size)
	}
	return p
}

// setISA makes the plan use instruction set isa (2 AVX-512, 1 AVX2, 0
// the baseline), at most the CPU's: for tests.
func (p *Plan) setISA(isa int) { p.isa = C.int(min(isa, int(maxISA))) }

// Len is the number of elements of an array.
func (p *Plan) Len() int { return p.Dims[0] * p.Dims[1] * p.Dims[2] }

// HalfLen is the number of complex coefficients of a real array's
// transform: n0·n1·(n2/2 + 1), the rest following by Hermitian symmetry.
func (p *Plan) HalfLen() int { return p.Dims[0] * p.Dims[1] * (p.Dims[2]/2 + 1) }

func cf(x []complex64) *C.float { return (*C.float)(unsafe.Pointer(&x[0])) }
func rf(x []float32) *C.float   { return (*C.float)(unsafe.Pointer(&x[0])) }

// Forward replaces x by its (unnormalised) discrete Fourier transform.
func (p *Plan) Forward(x []complex64) { p.transform(x, false) }

// Inverse replaces x by its inverse transform, normalised so that Inverse
// undoes Forward.
func (p *Plan) Inverse(x []complex64) { p.transform(x, true) }

func (p *Plan) transform(x []complex64, inverse bool) {
	if len(x) != p.Len() {
		panic("fft3: array length does not match the plan")
	}
	n0, n1, n2 := p.Dims[0], p.Dims[1], p.Dims[2]
	scale := float32(1)
	if inverse {
		scale = 1 / float32(p.Len())
	}
	p.strided(x, 0, n1*n2, 1, 0, inverse, 1, nil)
	p.strided(x, 1, n2, n0, n1*n2, inverse, 1, nil)
	inv := C.int(0)
	if inverse {
		inv = 1
	}
	parallel.Dynamic(n0*n1, chunkLines, func(lo, hi int) {
		s := <-p.scratch
		defer func() { p.scratch <- s }()
		C.tl_lanes_rows(p.isa, p.c[2], cf(x), C.int64_t(lo*n2), C.int64_t(hi-lo), C.int64_t(n2), inv, C.float(scale), rf(s))
	})
}

// strided transforms the lines along axis a, stride st: in each of outer
// slabs (slab stride slab), the st lines starting at slab·o + j, j < st,
// are neighbours in memory and go through the vector lanes together.
// Slabs o with skip[o] set are left alone (all zeros, or not needed).
func (p *Plan) strided(x []complex64, a, st, outer, slab int, inverse bool, scale float32, skip []bool) {
	per := (st + chunkLines - 1) / chunkLines
	inv := C.int(0)
	if inverse {
		inv = 1
	}
	parallel.Dynamic(outer*per, 1, func(lo, hi int) {
		s := <-p.scratch
		defer func() { p.scratch <- s }()
		for t := lo; t < hi; t++ {
			o, b := t/per, t%per
			if skip != nil && skip[o] {
				continue
			}
			j0 := b * chunkLines
			C.tl_lanes_strided(p.isa, p.c[a], cf(x), C.int64_t(o*slab+j0), C.int64_t(min(chunkLines, st-j0)),
				C.int64_t(st), inv, C.float(scale), rf(s))
		}
	})
}

// ForwardReal transforms the real array x (n0·n1·n2 values) into dst
// (HalfLen coefficients, the last axis halved): about half the work of
// Forward. Lines and planes of x that are all zero (a small kernel in a
// large array) are not transformed: their transforms are zero.
func (p *Plan) ForwardReal(dst []complex64, x []float32) {
	n0, n1, n2 := p.Dims[0], p.Dims[1], p.Dims[2]
	h := n2/2 + 1
	if len(x) != p.Len() || len(dst) != p.HalfLen() {
		panic("fft3: array lengths do not match the plan")
	}
	zeroPlane := p.flags
	parallel.Dynamic(n0, 1, func(lo, hi int) { // whole planes, so each flag has one writer
		s := <-p.scratch
		defer func() { p.scratch <- s }()
		for i := lo; i < hi; i++ {
			live := C.tl_lanes_r2c(p.isa, p.r, rf(x[i*n1*n2:]), C.int64_t(n2), cf(dst[i*n1*h:]), C.int64_t(h), C.int64_t(n1), rf(s))
			zeroPlane[i] = live == 0
		}
	})
	p.strided(dst, 1, h, n0, n1*h, false, 1, zeroPlane)
	p.strided(dst, 0, n1*h, 1, 0, false, 1, nil)
}

// InverseReal turns HalfLen coefficients c of a real array's transform
// back into the array, normalised so that it undoes ForwardReal. It
// overwrites c.
func (p *Plan) InverseReal(dst []float32, c []complex64) {
	p.InverseRealCrop(dst, c, [3]int{}, p.Dims)
}

// InverseRealCrop is InverseReal computing only the block of dst at
// [lo, lo+n) along each axis (the rest of dst is unspecified): the
// transforms along axes 1 and 2 run only where that block needs them.
func (p *Plan) InverseRealCrop(dst []float32, c []complex64, lo, n [3]int) {
	p.InverseRealCropWith(dst, c, lo, n, nil, nil)
}

// CropPieces is the number of pieces InverseRealCropWith writes a block
// of n in: done is called once for each.
func CropPieces(n [3]int) int { return n[0] * ((n[1] + chunkLines - 1) / chunkLines) }

// InverseRealCropWith is InverseRealCrop with two hooks that let a caller
// work on the data while a worker has it in cache. fill(j0, j1), when not
// nil, must write the coefficients of c in rows j0 … j1−1 of every plane
// (axis 1), which the transform then reads first. done(t, i, j0, rows, m)
// is called for each piece of the block as it is written: rows holds the
// m rows (i, j0 … j0+m−1), row r at rows[r·n2:][:n2] (the block's columns
// from lo[2]), t numbers the pieces in order, 0 … CropPieces(n)−1. With
// dst nil the rows are written only to a buffer of the worker's, and done
// is where they can be read; otherwise rows is dst's. Both hooks are
// called from several goroutines at once, on disjoint rows. c's planes in
// the block are left as they were after the transform along axis 0.
func (p *Plan) InverseRealCropWith(dst []float32, c []complex64, lo, n [3]int, fill func(j0, j1 int), done func(t, i, j0 int, rows []float32, m int)) {
	n1, n2 := p.Dims[1], p.Dims[2]
	h := n2/2 + 1
	if (dst != nil && len(dst) != p.Len()) || len(c) != p.HalfLen() {
		panic("fft3: array lengths do not match the plan")
	}
	for a := range 3 {
		if lo[a] < 0 || n[a] < 0 || lo[a]+n[a] > p.Dims[a] {
			panic("fft3: crop outside the array")
		}
	}
	if fill == nil {
		p.strided(c, 0, n1*h, 1, 0, true, 1, nil)
	} else {
		// Whole rows at a time, about chunkLines lines or more: filled,
		// then transformed along axis 0 while they are in cache.
		rows := max(1, chunkLines/h, (256<<10)/(8*h*p.Dims[0]))
		parallel.Dynamic(n1, rows, func(j0, j1 int) {
			fill(j0, j1)
			s := <-p.scratch
			defer func() { p.scratch <- s }()
			for t := j0 * h; t < j1*h; t += chunkLines {
				C.tl_lanes_strided(p.isa, p.c[0], cf(c), C.int64_t(t), C.int64_t(min(chunkLines, j1*h-t)),
					C.int64_t(n1*h), 1, 1, rf(s))
			}
		})
	}
	// Plane by plane of the block, in a buffer of the worker's that stays
	// in cache: the transforms along axis 1 (only of the rows' block along
	// axis 1 is needed, but every line along it is), then rows
	// (i, lo[1] … lo[1]+n[1]) back to real values, in chunks.
	scale := 1 / float32(p.Len())
	per := (n[1] + chunkLines - 1) / chunkLines
	parallel.Dynamic(n[0], 1, func(a, b int) {
		s := <-p.scratch
		defer func() { p.scratch <- s }()
		buf := p.planes.Get(n1*h + (chunkLines*n2+1)/2)
		defer p.planes.Put(buf)
		plane := buf[:n1*h]
		out := unsafe.Slice((*float32)(unsafe.Pointer(&buf[n1*h])), chunkLines*n2)
		for pi := a; pi < b; pi++ {
			i := lo[0] + pi
			copy(plane, c[i*n1*h:(i+1)*n1*h])
			for k0 := 0; k0 < h; k0 += chunkLines {
				C.tl_lanes_strided(p.isa, p.c[1], cf(plane), C.int64_t(k0), C.int64_t(min(chunkLines, h-k0)),
					C.int64_t(h), 1, 1, rf(s))
			}
			for q := range per {
				j0 := lo[1] + q*chunkLines
				m := min(chunkLines, lo[1]+n[1]-j0)
				rows := out[:m*n2]
				if dst != nil {
					rows = dst[(i*n1+j0)*n2:][:m*n2]
				}
				C.tl_lanes_c2r(p.isa, p.r, cf(plane[j0*h:]), C.int64_t(h), rf(rows), C.int64_t(n2), C.int64_t(m), C.float(scale), rf(s))
				if done != nil {
					done(pi*per+q, i, j0, rows, m)
				}
			}
		}
	})
}
