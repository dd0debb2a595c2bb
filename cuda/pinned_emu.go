//go:build tapeloop_cudaemu && !tapeloop_cuda

package cuda

// HostFloat32 returns n float32s of host memory (the emulator's copies
// need no page-locked memory).
func HostFloat32(_ *Device, n int) ([]float32, error) {
	if n <= 0 {
		return nil, nil
	}
	return make([]float32, n), nil
}

// Pinned remembers the Go buffers registered with the driver.
type Pinned struct{}

// Register is a no-op in the emulator: it reports false, as a driver that
// refuses to pin does, and the copies stay correct.
func Register[T any](*Device, *Pinned, []T) bool { return false }
