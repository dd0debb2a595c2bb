// Package fft3 computes 3-D discrete Fourier transforms of complex arrays
// in C order, axis by axis with gonum's FFTPACK port: any sizes, float64.
package fft3

import "gonum.org/v1/gonum/dsp/fourier"

// Plan transforms arrays of fixed dimensions; it owns its scratch and is
// not safe for concurrent use.
type Plan struct {
	Dims [3]int
	fft  [3]*fourier.CmplxFFT
	line []complex128
}

// New returns a plan for n0×n1×n2 arrays.
func New(n0, n1, n2 int) *Plan {
	p := &Plan{Dims: [3]int{n0, n1, n2}, line: make([]complex128, max(n0, n1, n2))}
	for a, n := range p.Dims {
		p.fft[a] = fourier.NewCmplxFFT(n)
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
	for i := range x {
		x[i] *= s
	}
}

func (p *Plan) transform(x []complex128, inverse bool) {
	if len(x) != p.Len() {
		panic("fft3: array length does not match the plan")
	}
	n0, n1, n2 := p.Dims[0], p.Dims[1], p.Dims[2]
	strides := [3]int{n1 * n2, n2, 1}
	for a := range 3 {
		n, st := p.Dims[a], strides[a]
		line := p.line[:n]
		f := p.fft[a]
		// Every line along axis a: the other two indices vary.
		for base := range n0 * n1 * n2 {
			if (base/st)%n != 0 {
				continue // not the start of a line along a
			}
			for i := range n {
				line[i] = x[base+i*st]
			}
			if inverse {
				f.Sequence(line, line)
			} else {
				f.Coefficients(line, line)
			}
			for i := range n {
				x[base+i*st] = line[i]
			}
		}
	}
}
