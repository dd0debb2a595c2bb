//go:build tapeloop_cuda || tapeloop_cudaemu

package cuda

import (
	"fmt"
	"unsafe"
)

// Arena is one device allocation, made once and handed out in aligned
// pieces: a Program's buffers live in it, so its size, planned under
// --mem-limit, bounds the device memory the run takes.
type Arena struct {
	dev  *Device
	base DevicePtr
	size int64
	off  int64
	peak int64
}

// arenaAlign keeps every buffer aligned for vector loads.
const arenaAlign = 256

// NewArena allocates bytes of device memory (plain cuMemAlloc, not
// managed memory).
func (d *Device) NewArena(bytes int64) (*Arena, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("%w: arena of %d bytes", ErrDevice, bytes)
	}
	if d.limit > 0 && d.inArenas+bytes > d.limit {
		return nil, fmt.Errorf("%w: an arena of %d bytes would take device memory to %d, over the limit of %d (--mem-limit)",
			ErrDevice, bytes, d.inArenas+bytes, d.limit)
	}
	a := &Arena{dev: d, size: bytes}
	if err := d.Do(func() (err error) { a.base, err = d.drv.alloc(bytes); return err }); err != nil {
		return nil, fmt.Errorf("%w: allocating %d bytes on device %d: %v", ErrDevice, bytes, d.Ordinal, err)
	}
	d.inArenas += bytes
	return a, nil
}

// Alloc returns the next bytes of the arena.
func (a *Arena) Alloc(bytes int64) (DevicePtr, error) {
	off := (a.off + arenaAlign - 1) / arenaAlign * arenaAlign
	if bytes < 0 || off+bytes > a.size {
		return 0, fmt.Errorf("%w: arena of %d bytes cannot hold %d more (%d in use)", ErrDevice, a.size, bytes, a.off)
	}
	a.off = off + bytes
	a.peak = max(a.peak, a.off)
	return a.base + DevicePtr(off), nil
}

// Size is the arena's size in bytes.
func (a *Arena) Size() int64 { return a.size }

// Free releases the allocation.
func (a *Arena) Free() error {
	if a.base == 0 {
		return nil
	}
	err := a.dev.Do(func() error { return a.dev.drv.free(a.base) })
	a.base = 0
	a.dev.inArenas -= a.size
	return err
}

// Upload copies host memory to the device.
func Upload[T any](d *Device, dst DevicePtr, src []T) error {
	if len(src) == 0 {
		return nil
	}
	n := int64(len(src)) * int64(unsafe.Sizeof(src[0]))
	return d.Do(func() error {
		if err := d.drv.toDevice(dst, unsafe.Pointer(&src[0]), n); err != nil {
			return fmt.Errorf("%w: copying %d bytes to the device: %v", ErrDevice, n, err)
		}
		return nil
	})
}

// Download copies device memory to the host.
func Download[T any](d *Device, dst []T, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	n := int64(len(dst)) * int64(unsafe.Sizeof(dst[0]))
	return d.Do(func() error {
		if err := d.drv.toHost(unsafe.Pointer(&dst[0]), src, n); err != nil {
			return fmt.Errorf("%w: copying %d bytes from the device: %v", ErrDevice, n, err)
		}
		return nil
	})
}

// Download2D copies rows×cols Ts from the device, where a row starts
// every spitch elements, into dst, where a row starts every dpitch
// elements (cuMemcpy2D): a block of columns without the others.
func Download2D[T any](d *Device, dst []T, dpitch int, src DevicePtr, spitch, rows, cols int) error {
	if rows <= 0 || cols <= 0 {
		return nil
	}
	if err := check2D(len(dst), dpitch, spitch, rows, cols); err != nil {
		return err
	}
	sz := int64(unsafe.Sizeof(dst[0]))
	return d.Do(func() error {
		if err := d.drv.toHost2D(unsafe.Pointer(&dst[0]), int64(dpitch)*sz, src, int64(spitch)*sz, int64(cols)*sz, int64(rows)); err != nil {
			return fmt.Errorf("%w: copying %d×%d bytes from the device: %v", ErrDevice, rows, int64(cols)*sz, err)
		}
		return nil
	})
}

// check2D checks that a rows×cols copy with the given pitches fits its
// destination of n elements.
func check2D(n, dpitch, spitch, rows, cols int) error {
	if cols > dpitch || cols > spitch || (rows-1)*dpitch+cols > n {
		return fmt.Errorf("%w: a %d×%d copy with pitches %d and %d into %d elements", ErrDevice, rows, cols, dpitch, spitch, n)
	}
	return nil
}

// Poison fills n float32s at p with NaN, so that elements a kernel fails
// to write show in a comparison.
func Poison(d *Device, p DevicePtr, n int64) error {
	return d.Do(func() error { return d.drv.fill32(p, 0x7fc00000, n) })
}

// Zero clears n float32s at p.
func Zero(d *Device, p DevicePtr, n int64) error {
	return d.Do(func() error { return d.drv.fill32(p, 0, n) })
}
