//go:build tapeloop_cuda || tapeloop_cudaemu

package cuda

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// ErrDevice is wrapped by every error of the GPU backend.
var ErrDevice = errors.New("cuda")

// Device is one GPU with tapeloop's kernels loaded.
type Device struct {
	Ordinal int
	Name    string
	drv     *driver    // the CUDA driver (driver.go) or the emulator (driver_emu.go)
	mu      sync.Mutex // serialises Do: one CUDA call sequence at a time
	def     *Stream    // the default stream, with its timing events

	limit, inArenas int64   // bytes arenas may take (0: no limit), and take now
	busy            float64 // seconds of GPU work timed so far
}

// SetLimit bounds the device memory all arenas together may take, as
// CuPy's mempool.set_limit does; tapeloop sets it to --mem-limit.
func (d *Device) SetLimit(bytes int64) { d.limit = bytes }

// Do runs fn on the context's thread, where the context is current.
func (d *Device) Do(fn func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.drv.do(fn)
}

// String names the device, as in "cuda:0 (NVIDIA H200)".
func (d *Device) String() string { return fmt.Sprintf("cuda:%d (%s)", d.Ordinal, d.Name) }

// Launch limits of every GPU since compute capability 3.0.
const (
	maxBlock = 1024
	maxGridX = 1<<31 - 1
	maxGridY = 65535
)

// Run launches kernel name over gx×gy blocks of block threads and waits
// for it, so that a launch error or a fault in the kernel is returned
// here, not at some later call. Its arguments are values: each an int64,
// a float64 or a DevicePtr (every tapeloop kernel parameter is 8 bytes
// wide).
func (d *Device) Run(name string, gx, gy, block int, args ...any) error {
	words, err := launchWords(name, gx, gy, block, args)
	if err != nil {
		return err
	}
	return d.timed(func() error { return d.def.launch(name, gx, gy, block, words) })
}

// Launch queues kernel name like Run but does not wait for it: work
// queued between Begin and End runs back to back on the device's default
// stream, and a fault in it is returned by End (or by the next copy from
// the device).
func (d *Device) Launch(name string, gx, gy, block int, args ...any) error {
	return d.def.Launch(name, gx, gy, block, args...)
}

// launchWords checks a launch's configuration and turns its arguments
// into the 8-byte words the kernel takes.
func launchWords(name string, gx, gy, block int, args []any) ([]uint64, error) {
	if gx < 1 || gx > maxGridX || gy < 1 || gy > maxGridY || block < 1 || block > maxBlock {
		return nil, fmt.Errorf("%w: %s: launch of %d×%d blocks of %d threads is outside the GPU's limits", ErrDevice, name, gx, gy, block)
	}
	words := make([]uint64, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			words[i] = uint64(v)
		case float64:
			words[i] = math.Float64bits(v)
		case DevicePtr:
			words[i] = uint64(v)
		default:
			return nil, fmt.Errorf("%w: %s: argument %d is a %T", ErrDevice, name, i, a)
		}
	}
	return words, nil
}

// timed runs fn, work on the default stream, inside Do, waits for it,
// and adds its GPU time (between two CUDA events) to BusySeconds.
func (d *Device) timed(fn func() error) error {
	return d.Do(func() error {
		if err := d.def.begin(); err != nil {
			return err
		}
		if err := fn(); err != nil {
			return err
		}
		return d.def.end()
	})
}

// Begin starts timing the work queued on the default stream from now on
// (Launch, FFT3, Zero).
func (d *Device) Begin() error { return d.def.Begin() }

// End waits for the work queued on the default stream since Begin, adds
// its GPU time to BusySeconds, and returns the first fault in it.
func (d *Device) End() error { return d.def.End() }

// BusySeconds is the GPU time of every kernel, GEMM and FFT run so far, as
// CUDA events measure it: the device's share of a batch, without the
// copies and the host's work.
func (d *Device) BusySeconds() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.busy
}

// MemInfo is the device's free and total memory, in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.Do(func() (err error) { free, total, err = d.drv.memInfo(); return err })
	return free, total, err
}

// Close releases the context and everything allocated in it.
func (d *Device) Close() error {
	if d.drv == nil {
		return nil
	}
	err := d.drv.close()
	d.drv = nil
	return err
}
