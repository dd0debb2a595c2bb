//go:build tapeloop_cudaemu && !tapeloop_cuda

package cuda

import (
	"fmt"
	"math"
	"math/cmplx"
	"unsafe"
)

// emuFFTWork is the work area the emulated plans ask for, so that the
// caller's placing of it is exercised.
const emuFFTWork = 4096

// NewFFT3 makes emulated cuFFT plans: direct DFTs along each axis in
// complex128 (slow, exact enough to stand for cuFFT), with cuFFT's layout
// and rules: the half spectrum is n0×n1×(n2/2+1) complex64, row-major; the
// inverse is unnormalised and ignores the imaginary parts a real array's
// spectrum cannot have; plans need their work area set before they run.
func (d *Device) NewFFT3(n0, n1, n2 int) (*FFT3, error) {
	if n0 < 1 || n1 < 1 || n2 < 1 || int64(n0)*int64(n1)*int64(n2) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: cuFFT R2C plan %v: error %d", ErrDevice, [3]int{n0, n1, n2}, 4) // CUFFT_INVALID_VALUE
	}
	return &FFT3{Dims: [3]int{n0, n1, n2}, Work: emuFFTWork, dev: d}, nil
}

// SetWorkArea gives both plans the work area at p.
func (f *FFT3) SetWorkArea(p DevicePtr) error {
	return f.dev.Do(func() error {
		if _, err := f.dev.drv.span("cufftSetWorkArea", p, f.Work); err != nil {
			return fmt.Errorf("%w: %v", ErrDevice, err)
		}
		f.work = p
		return nil
	})
}

// arrays returns the host addresses of a transform's input and output.
func (f *FFT3) arrays(what string, in, out DevicePtr, inBytes, outBytes int64) (unsafe.Pointer, unsafe.Pointer, error) {
	if f.work == 0 {
		return nil, nil, fmt.Errorf("%w: %s: the plan has no work area", ErrDevice, what)
	}
	if in%8 != 0 || out%8 != 0 {
		return nil, nil, fmt.Errorf("%w: %s: misaligned arrays", ErrDevice, what)
	}
	drv := f.dev.drv
	drv.land() // the default stream's earlier copies
	i, err := drv.span(what+" input", in, inBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrDevice, err)
	}
	o, err := drv.span(what+" output", out, outBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrDevice, err)
	}
	return i, o, nil
}

// Forward transforms the real array at in into the half spectrum at out.
func (f *FFT3) Forward(in, out DevicePtr) error {
	n0, n1, n2 := f.Dims[0], f.Dims[1], f.Dims[2]
	h := n2/2 + 1
	return f.dev.Do(func() error {
		hi, ho, err := f.arrays("cuFFT R2C", in, out, 4*int64(n0*n1*n2), 8*int64(f.HalfLen()))
		if err != nil {
			return err
		}
		x := unsafe.Slice((*float32)(hi), n0*n1*n2)
		s := make([]complex128, n0*n1*h)
		w2 := twiddles(n2, -1)
		for r := range n0 * n1 { // the last axis, real to half complex
			line := x[r*n2 : (r+1)*n2]
			for k := range h {
				var acc complex128
				for j, v := range line {
					acc += complex(float64(v), 0) * w2[j*k%n2]
				}
				s[r*h+k] = acc
			}
		}
		dftAxes(s, n0, n1, h, -1)
		y := unsafe.Slice((*complex64)(ho), len(s))
		for i, v := range s {
			y[i] = complex64(v)
		}
		return nil
	})
}

// Inverse transforms the half spectrum at in into the real array at out,
// unnormalised.
func (f *FFT3) Inverse(in, out DevicePtr) error {
	n0, n1, n2 := f.Dims[0], f.Dims[1], f.Dims[2]
	h := n2/2 + 1
	return f.dev.Do(func() error {
		hi, ho, err := f.arrays("cuFFT C2R", in, out, 8*int64(f.HalfLen()), 4*int64(n0*n1*n2))
		if err != nil {
			return err
		}
		y := unsafe.Slice((*complex64)(hi), f.HalfLen())
		s := make([]complex128, len(y))
		for i, v := range y {
			s[i] = complex128(v)
		}
		dftAxes(s, n0, n1, h, +1)
		x := unsafe.Slice((*float32)(ho), n0*n1*n2)
		w2 := twiddles(n2, +1)
		for r := range n0 * n1 { // half complex to real: X[n2−k] = conj(X[k])
			line := s[r*h : (r+1)*h]
			for j := range n2 {
				acc := real(line[0])
				for k := 1; k < h; k++ {
					if 2*k == n2 {
						acc += real(line[k]) * real(w2[j*k%n2]) // Nyquist: its real part only
					} else {
						acc += 2 * real(line[k]*w2[j*k%n2])
					}
				}
				x[r*n2+j] = float32(acc)
			}
		}
		return nil
	})
}

// Close destroys the plans.
func (f *FFT3) Close() error { f.work = 0; return nil }

// twiddles are exp(sign·2πi·j/n) for j < n.
func twiddles(n int, sign float64) []complex128 {
	w := make([]complex128, n)
	for j := range w {
		w[j] = cmplx.Exp(complex(0, sign*2*math.Pi*float64(j)/float64(n)))
	}
	return w
}

// dftAxes transforms s (n0×n1×h, row-major) along its first two axes.
func dftAxes(s []complex128, n0, n1, h int, sign float64) {
	for _, ax := range []struct{ n, stride, outer, inner int }{{n1, h, n0, h}, {n0, n1 * h, 1, n1 * h}} {
		w := twiddles(ax.n, sign)
		line := make([]complex128, ax.n)
		for o := range ax.outer {
			for i := range ax.inner {
				base := o*ax.n*ax.stride + i
				for k := range ax.n {
					var acc complex128
					for j := range ax.n {
						acc += s[base+j*ax.stride] * w[j*k%ax.n]
					}
					line[k] = acc
				}
				for k, v := range line {
					s[base+k*ax.stride] = v
				}
			}
		}
	}
}
