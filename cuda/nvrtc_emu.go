//go:build tapeloop_cudaemu && !tapeloop_cuda

package cuda

// loadSource: the emulator runs only the kernels of kernels/*.cu.
func (drv *driver) loadSource(*Device, string, []string) ([]string, error) {
	return nil, ErrNotEmulated
}
