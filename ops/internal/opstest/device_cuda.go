//go:build tapeloop_cuda || tapeloop_cudaemu

package opstest

import (
	"sync"
	"testing"

	"github.com/tapeloop/tapeloop/cuda"
)

var (
	gpuOnce sync.Once
	gpu     *cuda.Device
	gpuErr  error
)

// Device is GPU 0 (under tapeloop_cudaemu, the emulated one), opened once
// for the whole test binary.
func Device(tb testing.TB) *cuda.Device {
	gpuOnce.Do(func() { gpu, gpuErr = cuda.Open(0) })
	if gpuErr != nil {
		tb.Fatalf("opening GPU 0: %v", gpuErr)
	}
	return gpu
}
