//go:build tapeloop_cuda || tapeloop_cudaemu

package opkit

import "github.com/tapeloop/tapeloop/cuda"

// Run launches l on dev and waits for it.
func Run(dev *cuda.Device, l Launch) error { return dev.Run(l.Kernel, l.GX, l.GY, l.Block, l.Args...) }

// Enqueue queues l on dev without waiting (see cuda.Device.Launch).
func Enqueue(dev *cuda.Device, l Launch) error {
	return dev.Launch(l.Kernel, l.GX, l.GY, l.Block, l.Args...)
}

// EnqueueOn queues l on stream s.
func EnqueueOn(s *cuda.Stream, l Launch) error {
	return s.Launch(l.Kernel, l.GX, l.GY, l.Block, l.Args...)
}
