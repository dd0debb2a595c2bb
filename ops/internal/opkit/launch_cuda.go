//go:build tapeloop_cuda || tapeloop_cudaemu

package opkit

import (
	"fmt"
	"hash"

	"github.com/tapeloop/tapeloop/cuda"
)

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

// WriteTwinHash writes the hash of a GPU twin: its CPU op's parameters,
// then the device it runs on.
func WriteTwinHash(h hash.Hash, cpu interface{ WriteHash(hash.Hash) }, dev *cuda.Device) {
	cpu.WriteHash(h)
	fmt.Fprintf(h, "@%v", dev)
}

// TwinString names a GPU twin: its CPU op on dev. onCPU: a formula twin
// in a build whose run-time kernels are not emulated, computing on the
// CPU, which the name says.
func TwinString(cpu fmt.Stringer, dev *cuda.Device, onCPU bool) string {
	s := cpu.String() + "@" + dev.String()
	if onCPU {
		s += " (on the CPU: run-time kernels are not emulated)"
	}
	return s
}
