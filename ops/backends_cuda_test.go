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
	case *RigidDRR:
		err = poisonRays(o.deviceRays(), o.rays())
	case *Project:
		err = poisonRays(o.deviceRays(), o.NumViews()*o.Rows*o.Cols)
	case *projectAdjoint:
		err = poisonRays(o.fwd.deviceRays(), o.fwd.NumViews()*o.fwd.Rows*o.fwd.Cols)
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
	case *RigidDRR:
		if r := o.deviceRays(); r != nil {
			a = r.arena
		}
	case *Project:
		if r := o.deviceRays(); r != nil {
			a = r.arena
		}
	}
	if a == nil {
		return nil
	}
	return a.Free()
}

// poisonRays fills the device outputs of RigidDRR's and Project's twins
// (n rays) with NaN: the images, the derivatives, the volume's gradient.
func poisonRays(r *raysCUDA, n int) error {
	if r == nil || r.arena == nil {
		return nil
	}
	// float64 buffers: two float32 NaNs make a float64 NaN.
	bufs := []struct {
		p cuda.DevicePtr
		n int
	}{{r.dout, n}}
	if r.grads {
		bufs = append(bufs, struct {
			p cuda.DevicePtr
			n int
		}{r.dgs, 3 * n}, struct {
			p cuda.DevicePtr
			n int
		}{r.dgd, 3 * n})
	}
	if r.back {
		bufs = append(bufs, struct {
			p cuda.DevicePtr
			n int
		}{r.dgrad, int(r.nvol)})
	}
	for _, b := range bufs {
		if err := cuda.Poison(r.dev, b.p, 2*int64(b.n)); err != nil {
			return err
		}
	}
	return nil
}
