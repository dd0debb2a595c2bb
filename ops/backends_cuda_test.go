//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// backends are the places the conformance suites run: the CPU, and GPU 0
// through the ops' CUDA twins.
func backends(t *testing.T) []backend {
	return []backend{cpuBackend, {
		Name: "cuda", Dev: opstest.Device(t), OnDevice: OnDevice, GPU: true, Float32Only: true,
		Poison: poisonDevice, Release: releaseTwin,
	}}
}

// poisonDevice fills a twin's device output with NaN, so that what its
// kernels do not write shows (the wavelet twin's: its four float64 sums
// per row, NaN as two float32 NaN patterns).
func poisonDevice(t *testing.T, op G.Op) {
	t.Helper()
	var err error
	switch o := op.(type) {
	case *interp1DCUDA:
		err = cuda.Poison(o.dev, o.y, int64(o.Batch*o.outLen()))
	case *interp1DGradCUDA:
		err = cuda.Poison(o.dev, o.dout, int64(o.outLen()))
	case *drrCUDA:
		err = cuda.Poison(o.dev, o.dimg, int64(o.Batch*o.Rows*o.Cols))
	case *waveletCUDA:
		err = cuda.Poison(o.dev, o.dres, int64(2*WaveletSums*o.Batch))
	case *mapImagesCUDA:
		if o.arena != nil {
			err = cuda.Poison(o.dev, o.dout, int64(o.Batch*o.Rows*o.Cols))
		}
	case *filter2DCUDA:
		if o.arena != nil {
			err = cuda.Poison(o.dev, o.dtmp, int64(o.Batch*o.Rows*o.Cols))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// releaseTwin frees a twin's arena (the emulator checks its guard zone:
// a kernel that wrote past it fails here).
func releaseTwin(op G.Op) error {
	var a *cuda.Arena
	switch o := op.(type) {
	case *interp1DCUDA:
		a = o.arena
	case *interp1DGradCUDA:
		a = o.arena
	case *drrCUDA:
		a = o.arena
	case *waveletCUDA:
		a = o.arena
	case *mapImagesCUDA:
		a = o.arena
	case *filter2DCUDA:
		a = o.arena
	}
	if a == nil {
		return nil
	}
	return a.Free()
}
