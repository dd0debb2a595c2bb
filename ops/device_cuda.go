//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/cuda"
)

// GPUBuild is true in the GPU flavour: OpenGPU opens GPUs.
const GPUBuild = true

// GPUBackend says what this build's GPU backend is, for `tapeloop info`.
var GPUBackend = map[bool]string{
	false: "built in (--device cuda, --devices; cuFFT and cuBLAS loaded at run time)",
	true:  "EMULATED on the CPU (tapeloop_cudaemu test build: correct results, no speed)",
}[cuda.Emulated]

// OpenGPU opens the GPU of the given ordinal.
func OpenGPU(ordinal int) (Device, error) { return cuda.Open(ordinal) }

// cudaTwinner is implemented by the ops of other packages (ops/pairwise)
// that have a CUDA twin: OnDevice returns it, on d. Package ops cannot
// name them without an import cycle.
type cudaTwinner interface {
	OnDevice(d *cuda.Device) (G.Op, error)
}

func onDevice(op G.Op, dev Device) (G.Op, error) {
	d, ok := dev.(*cuda.Device)
	if !ok {
		return nil, fmt.Errorf("ops: device %v is not a CUDA device", dev)
	}
	switch o := op.(type) {
	case *Interp1D:
		return newInterp1DCUDA(o, d)
	case *Interp1DGrad:
		return newInterp1DGradCUDA(o, d)
	case *DRR:
		return newDRRCUDA(o, d), nil
	case *WaveletResponse:
		return newWaveletCUDA(o, d), nil
	case *MapImages:
		return newMapImagesCUDA(o, d)
	case *Filter2D:
		return newFilter2DCUDA(o, d), nil
	case *RigidDRR:
		return o.onCUDA(d)
	case *Project:
		return o.onCUDA(d)
	case cudaTwinner:
		return o.OnDevice(d)
	}
	return nil, fmt.Errorf("ops: %v has no CUDA twin yet", op)
}
