//go:build !fftw

package fft3

import (
	"runtime"

	"gonum.org/v1/gonum/dsp/fourier"

	"github.com/tapeloop/tapeloop/internal/parallel"
)

// block is the number of neighbouring lines moved together.
const block = 16

// worker holds one goroutine's FFTs and scratch.
type worker struct {
	fft  [3]*fourier.CmplxFFT
	rfft *fourier.FFT // real transforms along the last axis
	tile []complex128 // block lines of the longest axis
}

// Plan transforms arrays of fixed dimensions. A plan may be used by one
// goroutine at a time; it parallelises each transform itself, with one
// worker (FFTs and scratch, allocated once) per processor.
type Plan struct {
	Dims    [3]int
	workers chan *worker
}

// New returns a plan for n0×n1×n2 arrays.
func New(n0, n1, n2 int) *Plan {
	p := &Plan{Dims: [3]int{n0, n1, n2}}
	procs := runtime.GOMAXPROCS(0)
	p.workers = make(chan *worker, procs)
	for range procs {
		w := &worker{tile: make([]complex128, block*max(n0, n1, n2))}
		for a, n := range p.Dims {
			w.fft[a] = fourier.NewCmplxFFT(n)
		}
		w.rfft = fourier.NewFFT(n2)
		p.workers <- w
	}
	return p
}

// Len is the number of elements of an array.
func (p *Plan) Len() int { return p.Dims[0] * p.Dims[1] * p.Dims[2] }

// Forward replaces x by its (unnormalised) discrete Fourier transform.
func (p *Plan) Forward(x []complex128) { p.transform(x, false) }

// Inverse replaces x by its inverse transform, normalised so that Inverse
// undoes Forward.
func (p *Plan) Inverse(x []complex128) {
	p.transform(x, true)
	s := complex(1/float64(p.Len()), 0)
	parallel.For(len(x), 1<<16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x[i] *= s
		}
	})
}

func (p *Plan) transform(x []complex128, inverse bool) {
	if len(x) != p.Len() {
		panic("fft3: array length does not match the plan")
	}
	n0, n1, n2 := p.Dims[0], p.Dims[1], p.Dims[2]
	// The last axis is contiguous: transform its lines in place.
	parallel.Dynamic(n0*n1, 64, func(lo, hi int) {
		w := <-p.workers
		defer func() { p.workers <- w }()
		f := w.fft[2]
		for l := lo; l < hi; l++ {
			line := x[l*n2 : (l+1)*n2]
			if inverse {
				f.Sequence(line, line)
			} else {
				f.Coefficients(line, line)
			}
		}
	})
	// Axis 1 (stride n2) within each of the n0 planes, axis 0 (stride
	// n1·n2) across them: lines start at (outer, inner) with inner running
	// over a contiguous span of length inner.
	p.strided(x, 1, n1, n2, n0, n1*n2, inverse, nil)
	p.strided(x, 0, n0, n1*n2, 1, 0, inverse, nil)
}

// strided transforms the lines of length n and stride st along axis a: for
// each of outer slabs (slab stride slab), the st lines starting at
// slab·o + j, j < st, are neighbours in memory and move as blocks.
// Slabs o with zero[o] set are all zeros and stay so: they are skipped.
func (p *Plan) strided(x []complex128, a, n, st, outer, slab int, inverse bool, zero []bool) {
	blocks := (st + block - 1) / block
	parallel.Dynamic(outer*blocks, 1, func(lo, hi int) {
		w := <-p.workers
		defer func() { p.workers <- w }()
		f := w.fft[a]
		for t := lo; t < hi; t++ {
			o, b := t/blocks, t%blocks
			if zero != nil && zero[o] {
				continue
			}
			j0 := b * block
			m := min(block, st-j0)
			base := o*slab + j0
			tile := w.tile[:m*n]
			for i := range n { // row i of the block: m neighbours
				row := x[base+i*st : base+i*st+m]
				for j, v := range row {
					tile[j*n+i] = v
				}
			}
			for j := range m {
				line := tile[j*n : (j+1)*n]
				if inverse {
					f.Sequence(line, line)
				} else {
					f.Coefficients(line, line)
				}
			}
			for i := range n {
				row := x[base+i*st : base+i*st+m]
				for j := range row {
					row[j] = tile[j*n+i]
				}
			}
		}
	})
}

// HalfLen is the number of complex coefficients of a real array's
// transform: n0·n1·(n2/2 + 1), the rest following by Hermitian symmetry.
func (p *Plan) HalfLen() int { return p.Dims[0] * p.Dims[1] * (p.Dims[2]/2 + 1) }

// ForwardReal transforms the real array x (n0·n1·n2 values) into dst
// (HalfLen coefficients, the last axis halved): half the work of Forward.
// Lines and planes of x that are all zero (a small kernel in a large array)
// are not transformed: their transforms are zero.
func (p *Plan) ForwardReal(dst []complex128, x []float64) {
	n0, n1, n2 := p.Dims[0], p.Dims[1], p.Dims[2]
	h := n2/2 + 1
	if len(x) != p.Len() || len(dst) != p.HalfLen() {
		panic("fft3: array lengths do not match the plan")
	}
	zeroPlane := make([]bool, n0)
	parallel.Dynamic(n0, 1, func(lo, hi int) { // whole planes, so each flag has one writer
		w := <-p.workers
		defer func() { p.workers <- w }()
		for i := lo; i < hi; i++ {
			zeroPlane[i] = true
			for l := i * n1; l < (i+1)*n1; l++ {
				line, out := x[l*n2:(l+1)*n2], dst[l*h:(l+1)*h]
				if allZero(line) {
					clear(out)
					continue
				}
				zeroPlane[i] = false
				w.rfft.Coefficients(out, line)
			}
		}
	})
	p.strided(dst, 1, n1, h, n0, n1*h, false, zeroPlane)
	p.strided(dst, 0, n0, n1*h, 1, 0, false, nil)
}

func allZero(x []float64) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// InverseReal turns HalfLen coefficients c of a real array's transform
// back into the array, normalised so that it undoes ForwardReal. It
// overwrites c.
func (p *Plan) InverseReal(dst []float64, c []complex128) {
	n0, n1, n2 := p.Dims[0], p.Dims[1], p.Dims[2]
	h := n2/2 + 1
	if len(dst) != p.Len() || len(c) != p.HalfLen() {
		panic("fft3: array lengths do not match the plan")
	}
	p.strided(c, 0, n0, n1*h, 1, 0, true, nil)
	p.strided(c, 1, n1, h, n0, n1*h, true, nil)
	s := 1 / float64(p.Len())
	parallel.Dynamic(n0*n1, 64, func(lo, hi int) {
		w := <-p.workers
		defer func() { p.workers <- w }()
		for l := lo; l < hi; l++ {
			out := dst[l*n2 : (l+1)*n2]
			w.rfft.Sequence(out, c[l*h:(l+1)*h])
			for i := range out {
				out[i] *= s
			}
		}
	})
}

// InverseRealCrop is InverseReal computing only the block of dst at
// [lo, lo+n) along each axis (the rest of dst is unspecified): the
// transforms along axes 1 and 2 run only where that block needs them.
func (p *Plan) InverseRealCrop(dst []float64, c []complex128, lo, n [3]int) {
	n0, n1, n2 := p.Dims[0], p.Dims[1], p.Dims[2]
	h := n2/2 + 1
	if len(dst) != p.Len() || len(c) != p.HalfLen() {
		panic("fft3: array lengths do not match the plan")
	}
	for a := range 3 {
		if lo[a] < 0 || n[a] < 0 || lo[a]+n[a] > p.Dims[a] {
			panic("fft3: crop outside the array")
		}
	}
	p.strided(c, 0, n0, n1*h, 1, 0, true, nil)
	skip := make([]bool, n0)
	for i := range skip {
		skip[i] = i < lo[0] || i >= lo[0]+n[0]
	}
	p.strided(c, 1, n1, h, n0, n1*h, true, skip)
	s := 1 / float64(p.Len())
	parallel.Dynamic(n[0]*n[1], 64, func(a, b int) {
		w := <-p.workers
		defer func() { p.workers <- w }()
		for t := a; t < b; t++ {
			l := (lo[0]+t/n[1])*n1 + lo[1] + t%n[1]
			out := dst[l*n2 : (l+1)*n2]
			w.rfft.Sequence(out, c[l*h:(l+1)*h])
			for i := range out {
				out[i] *= s
			}
		}
	})
}
