//go:build tapeloop_cuda

package cuda

// Page-locked host memory: copies between it and the device run at the
// bus's speed, where pageable memory goes through a staging buffer at a
// fraction of it. Ops keep their outputs in pinned memory and pin the
// Program's input tensors (which never move: Go's heap does not move
// objects, and runtime.Pinner keeps them so for the driver).

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stddef.h>
static int tl_alloc_host(void **p, size_t n) { return cuMemAllocHost(p, n); }
// Portable: pinned for every context, so that each GPU of --devices
// copies into it at full speed (a second registration then reports
// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, and the memory is pinned all
// the same).
static int tl_host_register(void *p, size_t n) { return cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE); }
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// HostFloat32 returns n float32s of pinned host memory, for the life of
// the process.
func HostFloat32(d *Device, n int) ([]float32, error) {
	if n <= 0 {
		return nil, nil
	}
	var p unsafe.Pointer
	err := d.Do(func() error {
		if r := C.tl_alloc_host(&p, C.size_t(4*n)); r != 0 {
			return fmt.Errorf("%w: cuMemAllocHost of %d bytes: error %d", ErrDevice, 4*n, int(r))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := unsafe.Slice((*float32)(p), n)
	clear(s) // as Go's memory is: rows a short batch leaves alone read as zero
	return s, nil
}

// Pinned remembers the Go buffers registered with the driver.
type Pinned struct {
	pinner runtime.Pinner
	bufs   map[unsafe.Pointer]bool
}

// Register page-locks s's memory for fast copies, once per buffer; it
// reports false (and the copies stay correct, only slower) where the
// driver refuses.
func Register[T any](d *Device, pn *Pinned, s []T) bool {
	if len(s) == 0 {
		return false
	}
	p := unsafe.Pointer(&s[0])
	if pn.bufs == nil {
		pn.bufs = map[unsafe.Pointer]bool{}
	}
	if ok, seen := pn.bufs[p]; seen {
		return ok
	}
	pn.pinner.Pin(p)
	n := C.size_t(len(s)) * C.size_t(unsafe.Sizeof(s[0]))
	err := d.Do(func() error {
		if r := C.tl_host_register(p, n); r != 0 {
			return fmt.Errorf("cuMemHostRegister: %d", int(r))
		}
		return nil
	})
	pn.bufs[p] = err == nil
	return err == nil
}
