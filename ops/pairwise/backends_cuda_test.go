//go:build tapeloop_cuda || tapeloop_cudaemu

package pairwise

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/tapeloop/tapeloop/cuda"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// backends are, as in package ops, the places the conformance suites
// run: the CPU, and GPU 0 through the ops' CUDA twins.
func backends(t *testing.T) []backend {
	return []backend{cpuBackend, {
		Name: "cuda", Dev: opstest.Device(t), OnDevice: ops.OnDevice, GPU: true, Float32Only: true,
		Poison: poisonDevice, Release: releaseTwin,
		Chunk: func(op G.Op, rows int) {
			if p, ok := op.(*pairwiseCUDA); ok {
				p.chunk = rows
			}
		},
	}}
}

// poisonDevice fills a twin's device output with NaN, so that what its
// kernels do not write shows.
func poisonDevice(t *testing.T, op G.Op) {
	t.Helper()
	var err error
	switch o := op.(type) {
	case *pairwiseCUDA:
		err = cuda.Poison(o.dev, o.dout, int64(o.Batch*o.Data.N))
	case *pairFormulaCUDA:
		if o.arena != nil {
			err = cuda.Poison(o.dev, o.dout, int64(o.Batch*o.Data.N))
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
	case *pairwiseCUDA:
		a = o.arena
	case *pairFormulaCUDA:
		a = o.arena
	}
	if a == nil {
		return nil
	}
	return a.Free()
}
