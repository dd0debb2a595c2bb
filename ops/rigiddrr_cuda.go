//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/cuda"
)

// onCUDA is RigidDRR on a GPU: a new op of the same parameters whose rays
// are cast by drr_grad on dev (raysCUDA); the transform's derivatives are
// carried to the parameters on the host, as on the CPU.
func (op *RigidDRR) onCUDA(dev *cuda.Device) (G.Op, error) {
	t, err := NewRigidDRR(op.Vol, op.Views, op.Rows, op.Cols, op.Step, op.Center)
	if err != nil {
		return nil, err
	}
	t.kern = &raysCUDA{dev: dev, grads: true}
	return t, nil
}

// deviceRays is the twin's GPU backend (nil on the CPU).
func (op *RigidDRR) deviceRays() *raysCUDA {
	r, _ := op.kern.(*raysCUDA)
	return r
}
