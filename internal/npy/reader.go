package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"unsafe"
)

// Reader streams the elements of a .npy file in C order. Data stored in
// Fortran order (NumPy's fortran_order, as np.save writes a transposed or
// nibabel-loaded array) is read whole at the first read and reordered:
// such a file takes its data's size in memory while it is read.
type Reader struct {
	Header
	r    *bufio.Reader
	left int   // elements not yet read
	hlen int64 // the header's bytes, before the data
	raw  []byte
	end  func() error // when not nil, called as the last element is read: its error is the read's
}

// done is the error of the read that took the last element, from end.
func (r *Reader) done() error {
	if r.left > 0 || r.end == nil {
		return nil
	}
	end := r.end
	r.end = nil
	return end()
}

// NewReader reads the header from r and returns a Reader positioned at the
// first element.
func NewReader(r io.Reader) (*Reader, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	h, hlen, err := readHeaderLen(br)
	if err != nil {
		return nil, err
	}
	return &Reader{Header: h, r: br, left: h.Len(), hlen: hlen}, nil
}

// Remaining is the number of elements not yet read.
func (r *Reader) Remaining() int { return r.left }

// Read64 fills dst with the next len(dst) elements (fewer at the end of the
// data) converted to float64, and returns how many it read. It returns
// io.EOF when no element is left, and an error wrapping
// io.ErrUnexpectedEOF when the file ends before its header said it would
// (dst may then hold part of what was read).
func (r *Reader) Read64(dst []float64) (int, error) {
	return readInto(r, dst)
}

// Read32 is Read64 for float32 destinations. Values out of float32 range
// become ±Inf, as in NumPy's astype.
func (r *Reader) Read32(dst []float32) (int, error) {
	return readInto(r, dst)
}

// ReadU8 fills dst with the next len(dst) elements of uint8 data, as they
// are, and returns how many it read (io.EOF as Read64). Data of another
// dtype is an error.
func (r *Reader) ReadU8(dst []uint8) (int, error) {
	if r.Dtype.Kind != 'u' || r.Dtype.Size != 1 {
		return 0, fmt.Errorf("%w: %s data read as uint8", ErrFormat, r.Dtype.Name())
	}
	if r.left == 0 {
		if len(dst) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	if r.Transposed() && r.left == r.Len() {
		if err := r.toC(); err != nil {
			return 0, err
		}
	}
	n := min(len(dst), r.left)
	if got, err := io.ReadFull(r.r, dst[:n]); err != nil {
		return 0, r.truncated(got)
	}
	r.left -= n
	return n, r.done()
}

// truncated is the error of a read that ended got bytes into the
// elements still to read: how many of them are missing.
func (r *Reader) truncated(got int) error {
	missing := r.left - got/r.Dtype.Size
	return fmt.Errorf("%w: data truncated: %d of %d elements missing (%w)", ErrFormat, missing, r.Len(), io.ErrUnexpectedEOF)
}

func readInto[T float32 | float64](r *Reader, dst []T) (int, error) {
	if r.left == 0 {
		if len(dst) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	if r.Transposed() && r.left == r.Len() {
		if err := r.toC(); err != nil {
			return 0, err
		}
	}
	n := min(len(dst), r.left)
	sz := r.Dtype.Size
	need := n * sz
	if native[T](r.Dtype) { // the bytes as stored are the values: read them in place
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), need)
		if got, err := io.ReadFull(r.r, b); err != nil {
			return 0, r.truncated(got) // dst holds what was read
		}
		r.left -= n
		return n, r.done()
	}
	if cap(r.raw) < need {
		r.raw = make([]byte, need)
	}
	raw := r.raw[:need]
	if got, err := io.ReadFull(r.r, raw); err != nil {
		return 0, r.truncated(got)
	}
	decode(dst[:n], raw, r.Dtype)
	r.left -= n
	return n, r.done()
}

// toC reads the whole Fortran-ordered data and continues from it in C
// order. The buffer grows as the data arrives, so a header that promises
// more than the stream holds costs no more than what it holds.
func (r *Reader) toC() error {
	need := int64(r.Len()) * int64(r.Dtype.Size)
	f, err := io.ReadAll(io.LimitReader(r.r, need))
	if err != nil || int64(len(f)) < need {
		return fmt.Errorf("%w: data truncated: %d of %d elements missing (%w)", ErrFormat, (need-int64(len(f)))/int64(r.Dtype.Size),
			r.Len(), io.ErrUnexpectedEOF)
	}
	c := make([]byte, len(f))
	switch r.Dtype.Size {
	case 1:
		fortranToC(c, f, r.Shape)
	case 2:
		fortranToC(asWords[uint16](c), asWords[uint16](f), r.Shape)
	case 4:
		fortranToC(asWords[uint32](c), asWords[uint32](f), r.Shape)
	case 8:
		fortranToC(asWords[uint64](c), asWords[uint64](f), r.Shape)
	}
	r.r = bufio.NewReader(bytes.NewReader(c))
	return nil
}

// asWords views b as elements of E (b comes from make: aligned).
func asWords[E uint16 | uint32 | uint64](b []byte) []E {
	var e E
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(e)))
}

// fortranToC stores the array f, of the given shape in Fortran order,
// into c in C order. It walks c in order, keeping f's offset of the current
// index: the last axis steps through f by the product of the others.
func fortranToC[E uint8 | uint16 | uint32 | uint64](c, f []E, shape []int) {
	nd := len(shape)
	stride := make([]int, nd) // Fortran strides
	for a, s := 0, 1; a < nd; a++ {
		stride[a], s = s, s*shape[a]
	}
	idx := make([]int, nd)
	last, off := shape[nd-1], 0
	for i := 0; i < len(c); i += last {
		row, o, st := c[i:i+last], off, stride[nd-1]
		for k := range row {
			row[k] = f[o]
			o += st
		}
		for a := nd - 2; a >= 0; a-- { // the next index of the axes before the last
			idx[a]++
			off += stride[a]
			if idx[a] < shape[a] {
				break
			}
			off -= idx[a] * stride[a]
			idx[a] = 0
		}
	}
}

// LittleEndianHost reports whether this machine stores numbers least
// significant byte first, as amd64 and arm64 do (and as a little-endian
// .npy does): elements of a file's own type are then its bytes.
var LittleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// native reports whether data of type d is T's own bytes on this machine.
func native[T float32 | float64](d Dtype) bool {
	var t T
	return d.Kind == 'f' && d.Size == int(unsafe.Sizeof(t)) && d.Order == binary.LittleEndian && LittleEndianHost
}

// decode converts raw elements of type d into dst. Big-endian data is
// byte-swapped in raw first (raw comes from make: aligned), so that every
// conversion reads little-endian words without a call through d.Order.
func decode[T float32 | float64](dst []T, raw []byte, d Dtype) {
	if d.Order == binary.BigEndian {
		switch d.Size {
		case 2:
			w := asWords[uint16](raw)
			for i := range w {
				w[i] = bits.ReverseBytes16(w[i])
			}
		case 4:
			w := asWords[uint32](raw)
			for i := range w {
				w[i] = bits.ReverseBytes32(w[i])
			}
		case 8:
			w := asWords[uint64](raw)
			for i := range w {
				w[i] = bits.ReverseBytes64(w[i])
			}
		}
	}
	o := binary.LittleEndian
	switch {
	case d.Kind == 'f' && d.Size == 4:
		for i := range dst {
			dst[i] = T(math.Float32frombits(o.Uint32(raw[4*i:])))
		}
	case d.Kind == 'f' && d.Size == 8:
		for i := range dst {
			dst[i] = T(math.Float64frombits(o.Uint64(raw[8*i:])))
		}
	case d.Kind == 'f' && d.Size == 2:
		for i := range dst {
			dst[i] = T(halfFloat(o.Uint16(raw[2*i:])))
		}
	case d.Kind == 'b':
		for i := range dst {
			if raw[i] != 0 {
				dst[i] = 1
			} else {
				dst[i] = 0
			}
		}
	case d.Kind == 'u' && d.Size == 1:
		for i := range dst {
			dst[i] = T(raw[i])
		}
	case d.Kind == 'i' && d.Size == 1:
		for i := range dst {
			dst[i] = T(int8(raw[i]))
		}
	case d.Kind == 'u' && d.Size == 2:
		for i := range dst {
			dst[i] = T(o.Uint16(raw[2*i:]))
		}
	case d.Kind == 'i' && d.Size == 2:
		for i := range dst {
			dst[i] = T(int16(o.Uint16(raw[2*i:])))
		}
	case d.Kind == 'u' && d.Size == 4:
		for i := range dst {
			dst[i] = T(o.Uint32(raw[4*i:]))
		}
	case d.Kind == 'i' && d.Size == 4:
		for i := range dst {
			dst[i] = T(int32(o.Uint32(raw[4*i:])))
		}
	case d.Kind == 'u' && d.Size == 8:
		for i := range dst {
			dst[i] = T(o.Uint64(raw[8*i:]))
		}
	case d.Kind == 'i' && d.Size == 8:
		for i := range dst {
			dst[i] = T(int64(o.Uint64(raw[8*i:])))
		}
	default:
		panic("npy: decode of unchecked dtype " + d.String())
	}
}

// File is an open .npy file read as a stream.
type File struct {
	*Reader
	f *os.File
}

// Open opens the .npy file at path and reads its header.
func Open(path string) (*File, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Check the size before anyone allocates for the data a corrupt
	// header may claim.
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		hdr, _ := f.Seek(0, io.SeekCurrent)
		hdr -= int64(r.r.Buffered())
		if need := int64(r.Len()) * int64(r.Dtype.Size); st.Size()-hdr < need {
			f.Close()
			return nil, fmt.Errorf("%s: %w: data truncated: the header promises %d bytes of %s, the file holds %d (%w)",
				path, ErrFormat, need, r.Dtype.Name(), st.Size()-hdr, io.ErrUnexpectedEOF)
		}
	}
	return &File{Reader: r, f: f}, nil
}

// Close closes the underlying file.
func (f *File) Close() error { return f.f.Close() }

// ReadAll64 reads the whole file at path as float64.
func ReadAll64(path string) (Header, []float64, error) {
	f, err := Open(path)
	if err != nil {
		return Header{}, nil, err
	}
	defer f.Close()
	data := make([]float64, f.Len())
	if _, err := f.Read64(data); err != nil && len(data) > 0 {
		return Header{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Header, data, nil
}

// halfFloat is the IEEE 754 half-precision number of bits h (NumPy's
// float16), exactly: every one is a float32.
func halfFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp, frac := uint32(h>>10)&0x1f, uint32(h)&0x3ff
	switch {
	case exp == 0x1f: // ±Inf, NaN (its payload kept)
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal: rebias the exponent 15 → 127
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	}
	// zero or subnormal: frac·2⁻²⁴, exact in float32
	v := float32(frac) * 0x1p-24
	if sign != 0 {
		v = -v
	}
	return v
}
