//go:build tapeloop_cuda || tapeloop_cudaemu

// The types of the two libraries loaded at run time, cuBLAS and cuFFT,
// shared by the driver (cublas.go, cufft.go) and the emulator
// (cublas_emu.go, cufft_emu.go).

package cuda

import "sync"

// BLASWorkspace is the size of the workspace a BLAS handle takes from its
// op's arena: cuBLAS's recommendation for Hopper (32 MiB; 4 MiB before).
const BLASWorkspace = 32 << 20

// BLAS is a cuBLAS handle on a device (cublas.go; cublas_emu.go in the
// emulator).
type BLAS struct {
	dev  *Device
	tf32 bool
	h    uintptr // the cublasHandle_t
}

// FFT3 is a pair of cuFFT plans, real-to-complex and complex-to-real, for
// n0×n1×n2 float32 arrays (the last axis halved in the spectrum, as
// internal/fft3), sharing a work area the caller places in an arena
// (cufft.go; cufft_emu.go in the emulator).
type FFT3 struct {
	Dims     [3]int
	Work     int64 // bytes of work area the plans need
	dev      *Device
	r2c, c2r int32     // the cufftHandles
	work     DevicePtr // the work area, once set
}

// HalfLen is the number of complex values of the half spectrum.
func (f *FFT3) HalfLen() int { return f.Dims[0] * f.Dims[1] * (f.Dims[2]/2 + 1) }

var fftWork sync.Map // "device n0 n1 n2" → int64: FFTWork's memo

// FFTWork is the work area cuFFT's plans for n0×n1×n2 arrays need on d,
// found by making the plans once (planners ask it for every batch size
// they try).
func (d *Device) FFTWork(n0, n1, n2 int) (int64, error) {
	key := [4]int{d.Ordinal, n0, n1, n2}
	if w, ok := fftWork.Load(key); ok {
		return w.(int64), nil
	}
	f, err := d.NewFFT3(n0, n1, n2)
	if err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	fftWork.Store(key, f.Work)
	return f.Work, nil
}
