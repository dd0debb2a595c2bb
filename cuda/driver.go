//go:build tapeloop_cuda

package cuda

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	_ "github.com/tapeloop/tapeloop/cuda/probe" // before cu's init: a clear error where no GPU is
)

//go:embed kernels/*.ptx
var ptx embed.FS

// DevicePtr is an address in a GPU's memory.
type DevicePtr = cu.DevicePtr

// Emulated is false in the GPU build (true in the emulator build).
const Emulated = false

// driver is a CUDA context with tapeloop's kernels loaded, reached through
// gorgonia.org/cu (driver_emu.go is the emulator with the same methods).
type driver struct {
	ctx   *cu.Ctx
	mods  []cu.Module
	funcs map[string]cu.Function
	cc    int // compute capability, as 10·major + minor

	rtMu   sync.Mutex            // LoadKernels, one at a time
	loaded map[[32]byte][]string // LoadKernels' sources on this device: their kernels
}

// A stream and an event of the driver; the zero stream is the context's
// default (legacy) stream.
type (
	stream = cu.Stream
	event  = cu.Event
)

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
	drv := &driver{funcs: map[string]cu.Function{}, loaded: map[[32]byte][]string{}}
	d = &Device{Ordinal: ordinal, drv: drv}
	d.Name, _ = dev.Name()
	major, err := dev.Attribute(cu.ComputeCapabilityMajor)
	if err != nil {
		return nil, fmt.Errorf("%w: device %d: compute capability: %v", ErrDevice, ordinal, err)
	}
	minor, err := dev.Attribute(cu.ComputeCapabilityMinor)
	if err != nil {
		return nil, fmt.Errorf("%w: device %d: compute capability: %v", ErrDevice, ordinal, err)
	}
	drv.cc = 10*major + minor
	defer func() { // cu.NewContext panics when the driver refuses
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: creating a context on device %d: %v", ErrDevice, ordinal, r)
		}
	}()
	drv.ctx = cu.NewContext(dev, cu.SchedAuto)
	if err := d.Do(func() (err error) { d.def, err = newStreamOn(d, stream{}); return err }); err != nil {
		return nil, err
	}
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
		drv.mods = append(drv.mods, mod)
		for _, name := range entries(string(src)) {
			var fn cu.Function
			if err := d.Do(func() (err error) { fn, err = mod.Function(name); return err }); err != nil {
				return nil, fmt.Errorf("%w: kernel %s: %v", ErrDevice, name, err)
			}
			drv.funcs[name] = fn
		}
	}
	return d, nil
}

func (drv *driver) do(fn func() error) error { return drv.ctx.Do(fn) }
func (drv *driver) close() error             { return drv.ctx.Close() }

func (drv *driver) memInfo() (free, total int64, err error) { return cu.MemInfo() }

func (drv *driver) newStream() (stream, error) { return cu.MakeStream(cu.NonBlocking) }

// newEvent makes an event; one without timing is cheaper to wait on.
func (drv *driver) newEvent(timing bool) (event, error) {
	if timing {
		return cu.MakeEvent(cu.DefaultEvent)
	}
	return cu.MakeEvent(cu.DisableTiming)
}

func (drv *driver) record(e event, s stream) error { return e.Record(s) }
func (drv *driver) wait(s stream, e event) error   { return s.Wait(e, 0) }
func (drv *driver) syncEvent(e event) error        { return e.Synchronize() }
func (drv *driver) syncStream(s stream) error      { return s.Synchronize() }

// elapsed is the GPU time between two recorded events, in seconds.
func (drv *driver) elapsed(start, stop event) (float64, error) {
	ms, err := start.Elapsed(stop)
	return ms / 1e3, err
}

// launch queues a kernel on stream s.
func (drv *driver) launch(s stream, name string, gx, gy, block int, words []uint64) error {
	fn, ok := drv.funcs[name]
	if !ok {
		return fmt.Errorf("no kernel %q", name)
	}
	ptrs := make([]unsafe.Pointer, len(words))
	for i := range words {
		ptrs[i] = unsafe.Pointer(&words[i])
	}
	if err := fn.Launch(gx, gy, 1, block, 1, 1, 0, s, ptrs); err != nil {
		return fmt.Errorf("launching: %v", err)
	}
	return nil
}

// The memory calls; each runs inside Device.Do.
func (drv *driver) alloc(bytes int64) (DevicePtr, error) { return cu.MemAlloc(bytes) }
func (drv *driver) free(p DevicePtr) error               { return cu.MemFree(p) }
func (drv *driver) toDevice(dst DevicePtr, src unsafe.Pointer, n int64) error {
	return cu.MemcpyHtoD(dst, src, n)
}
func (drv *driver) toHost(dst unsafe.Pointer, src DevicePtr, n int64) error {
	return cu.MemcpyDtoH(dst, src, n)
}
func (drv *driver) toHost2D(dst unsafe.Pointer, dpitch int64, src DevicePtr, spitch, width, height int64) error {
	return cu.Memcpy2D(copy2D(dst, dpitch, src, spitch, width, height))
}
func (drv *driver) toHost2DAsync(s stream, dst unsafe.Pointer, dpitch int64, src DevicePtr, spitch, width, height int64) error {
	return cu.Memcpy2DAsync(copy2D(dst, dpitch, src, spitch, width, height), s)
}

// copy2D describes a copy of height rows of width bytes from the device to
// the host.
func copy2D(dst unsafe.Pointer, dpitch int64, src DevicePtr, spitch, width, height int64) cu.Memcpy2dParam {
	return cu.Memcpy2dParam{Height: height, WidthInBytes: width,
		DstHost: dst, DstMemoryType: cu.HostMemory, DstPitch: dpitch,
		SrcDevice: src, SrcMemoryType: cu.DeviceMemory, SrcPitch: spitch}
}
func (drv *driver) fill32(p DevicePtr, v uint32, n int64) error { return cu.MemsetD32(p, v, n) }
