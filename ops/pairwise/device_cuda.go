//go:build tapeloop_cuda || tapeloop_cudaemu

package pairwise

import (
	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/cuda"
)

// OnDevice returns the op's CUDA twin on dev; ops.OnDevice calls it.
func (op *Pairwise) OnDevice(dev *cuda.Device) (G.Op, error) { return newPairwiseCUDA(op, dev) }

// OnDevice returns the op's CUDA twin on dev; ops.OnDevice calls it.
func (op *PairwiseFormula) OnDevice(dev *cuda.Device) (G.Op, error) {
	return newPairFormulaCUDA(op, dev)
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
