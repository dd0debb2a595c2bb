//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/cuda"
)

func onDevice(op G.Op, dev Device) (G.Op, error) {
	d, ok := dev.(*cuda.Device)
	if !ok {
		return nil, fmt.Errorf("ops: device %v is not a CUDA device", dev)
	}
	switch o := op.(type) {
	case *Interp1D:
		return newInterp1DCUDA(o, d)
	case *DRR:
		return newDRRCUDA(o, d), nil
	case *Pairwise:
		return newPairwiseCUDA(o, d)
	case *PairwiseFormula:
		return newPairFormulaCUDA(o, d)
	case *WaveletResponse:
		return newWaveletCUDA(o, d), nil
	case *MapImages:
		return newMapImagesCUDA(o, d)
	}
	return nil, fmt.Errorf("ops: %v has no CUDA twin yet", op)
}

// run launches l on dev and waits for it.
func run(dev *cuda.Device, l launch) error { return dev.Run(l.Kernel, l.GX, l.GY, l.Block, l.Args...) }

// enqueue queues l on dev without waiting (see cuda.Device.Launch).
func enqueue(dev *cuda.Device, l launch) error {
	return dev.Launch(l.Kernel, l.GX, l.GY, l.Block, l.Args...)
}

// enqueueOn queues l on stream s.
func enqueueOn(s *cuda.Stream, l launch) error {
	return s.Launch(l.Kernel, l.GX, l.GY, l.Block, l.Args...)
}
