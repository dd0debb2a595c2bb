package ops

import (
	"errors"

	G "gorgonia.org/gorgonia"
)

// Device is where an op runs: nil for the CPU, or a GPU opened by the
// cuda package in the GPU flavour (build tag tapeloop_cuda, or
// tapeloop_cudaemu for the CUDA emulator).
type Device interface {
	String() string
}

// ErrNoDevice is returned when a GPU op is asked of a build without one.
var ErrNoDevice = errors.New("this tapeloop was built without GPU support: build it with `make build-cuda`")

// OnDevice returns op itself on the CPU (dev nil), or its GPU twin on dev.
// The twin has the same type, shape and output ownership; it runs the
// same computation in the GPU's memory.
func OnDevice(op G.Op, dev Device) (G.Op, error) {
	if dev == nil {
		return op, nil
	}
	return onDevice(op, dev)
}
