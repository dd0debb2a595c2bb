//go:build tapeloop_cudaemu && !tapeloop_cuda

package cuda

// The emulated driver: a build with the tapeloop_cudaemu tag (and not
// tapeloop_cuda) runs the GPU twins on the CPU. "Device memory" is C heap
// memory; kernels run under internal/kernelemu (each block's threads are
// fibers on the launching thread), cuBLAS and cuFFT are reference loops with
// their documented argument rules (cublas_emu.go, cufft_emu.go). It checks
// what runs on the host side of the GPU code on machines without a GPU,
// and more strictly than a GPU would:
//   - fresh allocations hold NaN bytes, as a GPU's hold garbage, so data
//     read before it is written shows;
//   - every copy, fill, GEMM operand and FFT array must lie inside one live
//     allocation, and launches must respect the GPU's grid limits;
//   - a 4 KiB guard zone after each allocation is checked after every
//     launch and at every free: a kernel writing up to 4 KiB past its
//     arena fails the launch (further, it corrupts the heap as on a GPU);
//   - allocations beyond the device's memory fail, as cuMemAlloc does.
// It says nothing of speed. TAPELOOP_CUDAEMU_DEVICES sets the number of
// emulated GPUs (default 2), TAPELOOP_CUDAEMU_MEM each one's memory
// (default 8GiB).

/*
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"github.com/tapeloop/tapeloop/cuda/kernels"
	"github.com/tapeloop/tapeloop/internal/kernelemu"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// DevicePtr is an address in an emulated GPU's memory (host memory).
type DevicePtr uintptr

// Emulated is true in the emulator build.
const Emulated = true

const guardBytes = 4096

var guardPattern = bytes.Repeat([]byte{0xa5}, guardBytes)

type driver struct {
	total, used int64
	allocs      map[DevicePtr]allocation // the live allocations
	inFlight    []func()                 // copies to the device not yet landed (stream_emu.go)
}

type allocation struct {
	n int64          // bytes
	p unsafe.Pointer // the C memory (n bytes and the guard zone)
}

func emuDevices() (n int, mem int64, err error) {
	n, mem = 2, 8<<30
	if s := os.Getenv("TAPELOOP_CUDAEMU_DEVICES"); s != "" {
		if n, err = strconv.Atoi(s); err != nil || n < 0 {
			return 0, 0, fmt.Errorf("%w: TAPELOOP_CUDAEMU_DEVICES=%q: want a count", ErrDevice, s)
		}
	}
	if s := os.Getenv("TAPELOOP_CUDAEMU_MEM"); s != "" {
		if mem, err = sysmem.ParseSize(s); err != nil {
			return 0, 0, fmt.Errorf("%w: TAPELOOP_CUDAEMU_MEM: %v", ErrDevice, err)
		}
	}
	return n, mem, nil
}

// Open makes emulated GPU ordinal.
func Open(ordinal int) (*Device, error) {
	n, mem, err := emuDevices()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: device %d does not exist (%d GPUs)", ErrDevice, ordinal, n)
	}
	drv := &driver{total: mem, allocs: map[DevicePtr]allocation{}}
	d := &Device{Ordinal: ordinal, Name: "CUDA emulator on the CPU", drv: drv}
	if d.def, err = newStreamOn(d, &emuStream{drv: drv, def: true}); err != nil {
		return nil, err
	}
	return d, nil
}

func (drv *driver) do(fn func() error) error { return fn() }

func (drv *driver) close() error {
	var err error
	for p := range drv.allocs {
		if e := drv.free(p); err == nil {
			err = e
		}
	}
	return err
}

func (drv *driver) memInfo() (free, total int64, err error) {
	return drv.total - drv.used, drv.total, nil
}

func (drv *driver) alloc(n int64) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuMemAlloc of %d bytes: invalid value", n)
	}
	if drv.used+n > drv.total {
		return 0, fmt.Errorf("cuMemAlloc of %d bytes: out of memory (%d of %d in use)", n, drv.used, drv.total)
	}
	p := spares.take(n)
	if p == nil {
		if p = C.malloc(C.size_t(n + guardBytes)); p == nil {
			return 0, fmt.Errorf("cuMemAlloc of %d bytes: out of host memory", n)
		}
	}
	C.memset(p, 0xff, C.size_t(n)) // NaN as float32 and float64: a GPU's fresh memory holds garbage
	copy(unsafe.Slice((*byte)(unsafe.Add(p, n)), guardBytes), guardPattern)
	a := DevicePtr(uintptr(p))
	drv.allocs[a] = allocation{n, p}
	drv.used += n
	return a, nil
}

func (drv *driver) free(p DevicePtr) error {
	drv.land()
	a, ok := drv.allocs[p]
	if !ok {
		return fmt.Errorf("cuMemFree of %#x: not an allocation", uintptr(p))
	}
	err := a.checkGuard()
	delete(drv.allocs, p)
	drv.used -= a.n
	if err != nil || !spares.keep(a.n, a.p) {
		C.free(a.p)
	}
	return err
}

// spares keeps freed host memory for the next allocation of the same
// size, up to spareBytes in all, in any emulated device of the process:
// the ops' tests make and free the same arenas (each with its cuBLAS
// workspace) hundreds of times, and memory the process already touched
// is filled without the kernel's page faults.
var spares = spareList{bySize: map[int64][]unsafe.Pointer{}}

const spareBytes = 1 << 30

type spareList struct {
	mu     sync.Mutex
	bytes  int64
	bySize map[int64][]unsafe.Pointer
}

// take returns a kept block of n bytes (and its guard zone), or nil.
func (s *spareList) take(n int64) unsafe.Pointer {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.bySize[n]
	if len(l) == 0 {
		return nil
	}
	p := l[len(l)-1]
	s.bySize[n] = l[:len(l)-1]
	s.bytes -= n
	return p
}

// keep keeps p, a block of n bytes, unless that would exceed spareBytes.
func (s *spareList) keep(n int64, p unsafe.Pointer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+n > spareBytes {
		return false
	}
	s.bySize[n] = append(s.bySize[n], p)
	s.bytes += n
	return true
}

func (a allocation) checkGuard() error {
	if !bytes.Equal(unsafe.Slice((*byte)(unsafe.Add(a.p, a.n)), guardBytes), guardPattern) {
		return fmt.Errorf("memory past the end of the %d-byte allocation at %p was written", a.n, a.p)
	}
	return nil
}

// span returns the host address of the n bytes at p, which must lie in
// one live allocation.
func (drv *driver) span(what string, p DevicePtr, n int64) (unsafe.Pointer, error) {
	if n < 0 {
		return nil, fmt.Errorf("%s: %d bytes", what, n)
	}
	for base, a := range drv.allocs {
		if p >= base && int64(p-base)+n <= a.n {
			return unsafe.Add(a.p, p-base), nil
		}
	}
	return nil, fmt.Errorf("%s: the %d bytes at %#x are not inside one allocation", what, n, uintptr(p))
}

// toDevice is a synchronous copy from pageable host memory: it returns
// once the source is read, but the data lands on the device only at the
// next work on the default stream or when a stream waits for it (see
// stream_emu.go).
func (drv *driver) toDevice(dst DevicePtr, src unsafe.Pointer, n int64) error {
	drv.land()
	if _, err := drv.span("cuMemcpyHtoD", dst, n); err != nil {
		return err
	}
	data := bytes.Clone(unsafe.Slice((*byte)(src), n))
	drv.inFlight = append(drv.inFlight, func() {
		if d, err := drv.span("cuMemcpyHtoD", dst, n); err == nil { // free lands copies first
			copy(unsafe.Slice((*byte)(d), n), data)
		}
	})
	return nil
}

// land completes the copies to the device in flight.
func (drv *driver) land() {
	for i, fn := range drv.inFlight {
		fn()
		drv.inFlight[i] = nil
	}
	drv.inFlight = drv.inFlight[:0]
}

func (drv *driver) toHost(dst unsafe.Pointer, src DevicePtr, n int64) error {
	drv.land()
	s, err := drv.span("cuMemcpyDtoH", src, n)
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(s), n))
	return nil
}

func (drv *driver) toHost2D(dst unsafe.Pointer, dpitch int64, src DevicePtr, spitch, width, height int64) error {
	drv.land()
	return drv.read2D("cuMemcpy2D", dst, dpitch, src, spitch, width, height)
}

// read2D copies height rows of width bytes from the device to the host.
func (drv *driver) read2D(what string, dst unsafe.Pointer, dpitch int64, src DevicePtr, spitch, width, height int64) error {
	s, err := drv.span(what, src, (height-1)*spitch+width)
	if err != nil {
		return err
	}
	for r := range height {
		copy(unsafe.Slice((*byte)(unsafe.Add(dst, r*dpitch)), width), unsafe.Slice((*byte)(unsafe.Add(s, r*spitch)), width))
	}
	return nil
}

func (drv *driver) fill32(p DevicePtr, v uint32, n int64) error {
	drv.land()
	if p%4 != 0 {
		return fmt.Errorf("cuMemsetD32 at %#x: misaligned", uintptr(p))
	}
	h, err := drv.span("cuMemsetD32", p, 4*n)
	if err != nil {
		return err
	}
	s := unsafe.Slice((*uint32)(h), n)
	for i := range s {
		s[i] = v
	}
	return nil
}

// emuKernels is the emulator's Program of kernels/*.cu, compiled at the
// process's first launch.
var emuKernels = sync.OnceValues(func() (*kernelemu.Program, error) {
	return kernelemu.Kernels(kernels.Sources)
})

// launchNow runs the kernel under the emulator, then checks every
// allocation's guard zone.
func (drv *driver) launchNow(name string, gx, gy, block int, words []uint64) error {
	prog, err := emuKernels()
	if err != nil {
		return err
	}
	if err := prog.Launch(name, gx, gy, block, words); err != nil {
		return err
	}
	for _, a := range drv.allocs {
		if err := a.checkGuard(); err != nil {
			return fmt.Errorf("out-of-bounds write: %v", err)
		}
	}
	return nil
}
