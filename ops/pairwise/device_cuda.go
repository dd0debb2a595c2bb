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
