//go:build tapeloop_cuda

package cuda

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

//go:embed kernels/*.ptx
var ptx embed.FS

// ErrDevice is wrapped by every error of the GPU backend.
var ErrDevice = errors.New("cuda")

// Device is one GPU with tapeloop's kernels loaded.
type Device struct {
	Ordinal int
	Name    string
	ctx     *cu.Ctx
	mods    []cu.Module
	funcs   map[string]cu.Function
	mu      sync.Mutex // serialises Do: one CUDA call sequence at a time

	limit, inArenas int64 // bytes arenas may take (0: no limit), and take now
}

// SetLimit bounds the device memory all arenas together may take, as
// CuPy's mempool.set_limit does; tapeloop sets it to --mem-limit.
func (d *Device) SetLimit(bytes int64) { d.limit = bytes }

// Open creates a context on GPU ordinal and loads every kernel.
func Open(ordinal int) (d *Device, err error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("%w: counting devices: %v", ErrDevice, err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: device %d does not exist (%d GPUs)", ErrDevice, ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("%w: device %d: %v", ErrDevice, ordinal, err)
	}
	d = &Device{Ordinal: ordinal, funcs: map[string]cu.Function{}}
	d.Name, _ = dev.Name()
	defer func() { // cu.NewContext panics when the driver refuses
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: creating a context on device %d: %v", ErrDevice, ordinal, r)
		}
	}()
	d.ctx = cu.NewContext(dev, cu.SchedAuto)
	files, err := fs.Glob(ptx, "kernels/*.ptx")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		src, err := ptx.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var mod cu.Module
		if err := d.Do(func() (err error) { mod, err = cu.LoadData(string(src)); return err }); err != nil {
			return nil, fmt.Errorf("%w: loading %s: %v", ErrDevice, path.Base(f), err)
		}
		d.mods = append(d.mods, mod)
		for _, name := range entries(string(src)) {
			var fn cu.Function
			if err := d.Do(func() (err error) { fn, err = mod.Function(name); return err }); err != nil {
				return nil, fmt.Errorf("%w: kernel %s: %v", ErrDevice, name, err)
			}
			d.funcs[name] = fn
		}
	}
	return d, nil
}

// Do runs fn on the context's thread, where the context is current.
func (d *Device) Do(fn func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctx.Do(fn)
}

// Close releases the context and everything allocated in it.
func (d *Device) Close() error {
	if d.ctx == nil {
		return nil
	}
	err := d.ctx.Close()
	d.ctx = nil
	return err
}

// MemInfo is the device's free and total memory, in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.Do(func() (err error) { free, total, err = cu.MemInfo(); return err })
	return free, total, err
}

// Launch2D runs kernel name over gx×gy blocks of block threads with the
// given arguments (pointers to each argument's value, as cuLaunchKernel
// takes them) and waits for it: a launch error or a fault in the kernel is
// returned here, not at some later call.
func (d *Device) Launch2D(name string, gx, gy, block int, args ...unsafe.Pointer) error {
	fn, ok := d.funcs[name]
	if !ok {
		return fmt.Errorf("%w: no kernel %q", ErrDevice, name)
	}
	return d.Do(func() error {
		if err := fn.Launch(gx, gy, 1, block, 1, 1, 0, cu.Stream{}, args); err != nil {
			return fmt.Errorf("%w: launching %s: %v", ErrDevice, name, err)
		}
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrDevice, name, err)
		}
		return nil
	})
}

// String names the device, as in "cuda:0 (NVIDIA H200)".
func (d *Device) String() string { return fmt.Sprintf("cuda:%d (%s)", d.Ordinal, d.Name) }

// Run launches kernel name like Launch2D, with its arguments given as
// values: each an int64, a float64 or a device pointer (every tapeloop
// kernel parameter is 8 bytes wide).
func (d *Device) Run(name string, gx, gy, block int, args ...any) error {
	words := make([]uint64, len(args))
	ptrs := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			words[i] = uint64(v)
		case float64:
			words[i] = math.Float64bits(v)
		case cu.DevicePtr:
			words[i] = uint64(v)
		default:
			return fmt.Errorf("%w: %s: argument %d is a %T", ErrDevice, name, i, a)
		}
		ptrs[i] = unsafe.Pointer(&words[i])
	}
	return d.Launch2D(name, gx, gy, block, ptrs...)
}
