//go:build tapeloop_cuda || tapeloop_cudaemu

package cuda

import "fmt"

// ErrNotEmulated is returned by LoadKernels in the emulator build, which
// does not run kernels compiled at run time: an op given it computes on
// the CPU instead (the emulator exercises everything around the kernel).
var ErrNotEmulated = fmt.Errorf("%w: kernels compiled at run time are not emulated", ErrDevice)

// LoadKernels compiles src, CUDA C, with NVRTC for the device (the
// library is loaded on first use: see package internal/nvrtc; opts are
// NVRTC options beside the architecture), loads the module and returns
// the names of its kernels, which Run, Launch and Stream.Launch then take
// like those of kernels/*.cu. The PTX is kept per source, options and
// architecture for the life of the process, and a source loaded on the
// device before is not loaded again. Kernel names must be unique across
// the sources loaded on a device. The emulator build returns
// ErrNotEmulated.
func (d *Device) LoadKernels(src string, opts []string) ([]string, error) {
	return d.drv.loadSource(d, src, opts)
}
