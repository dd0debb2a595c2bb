//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

import (
	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/cuda"
)

// onCUDA is Project on a GPU: a new op of the same parameters whose rays
// are cast by drr_grad, and whose adjoint back-projects by
// drr_backproject, on dev (raysCUDA).
func (op *Project) onCUDA(dev *cuda.Device) (G.Op, error) {
	t, err := NewProject(op.Vol, op.Views, op.Rows, op.Cols, op.Step)
	if err != nil {
		return nil, err
	}
	t.kern = &raysCUDA{dev: dev, back: true}
	return t, nil
}

// deviceRays is the twin's GPU backend (nil on the CPU).
func (op *Project) deviceRays() *raysCUDA {
	r, _ := op.kern.(*raysCUDA)
	return r
}
