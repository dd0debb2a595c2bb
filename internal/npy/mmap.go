package npy

import (
	"encoding/binary"
	"fmt"
	"io"
	"syscall"
	"unsafe"
)

// Mapped is the data of a .npy file mapped read-only into memory: its pages
// come from the page cache as they are touched and can be dropped by the
// kernel under pressure, so a file larger than memory can still be swept.
//
// A file truncated by another process while it is mapped does not crash
// the process: the read that finds the data gone gets zeros, and the
// process reports the file (named as NameInput says, else by its path) and
// ends with exit status 1, its pending outputs removed. See guard.go.
type Mapped[T float32 | float64 | uint8] struct {
	Header
	Data []T
	mem  []byte
	slot int
}

// Map maps the .npy file at path when its dtype is exactly T in
// little-endian byte order (float32: '<f4', float64: '<f8', uint8: '|u1')
// in C order. It
// returns ok == false, and no error, for any other dtype or order, and when
// the mapping could not be watched for a truncation, so the caller can
// fall back to reading and converting.
func Map[T float32 | float64 | uint8](path string) (m *Mapped[T], ok bool, err error) {
	f, err := Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var zero T
	want := Float32
	switch unsafe.Sizeof(zero) {
	case 8:
		want = Float64
	case 1:
		want = Dtype{Kind: 'u', Size: 1}
	}
	if f.Dtype.Kind != want.Kind || f.Dtype.Size != want.Size || (want.Size > 1 && f.Dtype.Order != binary.LittleEndian) ||
		f.Len() == 0 || f.Transposed() {
		return nil, false, nil
	}
	st, err := f.f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, false, nil
	}
	pos, err := f.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false, nil
	}
	off := pos - int64(f.r.Buffered())
	size := off + int64(f.Len())*int64(want.Size)
	mem, err := syscall.Mmap(int(f.f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, false, fmt.Errorf("%s: map: %w", path, err)
	}
	data := unsafe.Slice((*T)(unsafe.Pointer(&mem[off])), f.Len())
	if uintptr(unsafe.Pointer(&data[0]))%unsafe.Alignof(zero) != 0 {
		syscall.Munmap(mem)
		return nil, false, nil
	}
	slot, ok := guard(mem, f.f, path)
	if !ok { // unguarded, a truncation would crash the process: read instead
		syscall.Munmap(mem)
		return nil, false, nil
	}
	return &Mapped[T]{Header: f.Header, Data: data, mem: mem, slot: slot}, true, nil
}

// Close unmaps the data; Data must not be used after.
func (m *Mapped[T]) Close() error {
	m.Data = nil
	unguard(m.slot)
	return syscall.Munmap(m.mem)
}
