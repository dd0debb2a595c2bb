package npy

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
)

// Reader streams the elements of a .npy file in C order.
type Reader struct {
	Header
	r    *bufio.Reader
	left int // elements not yet read
	raw  []byte
}

// NewReader reads the header from r and returns a Reader positioned at the
// first element.
func NewReader(r io.Reader) (*Reader, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	h, err := readHeader(br)
	if err != nil {
		return nil, err
	}
	return &Reader{Header: h, r: br, left: h.Len()}, nil
}

// Remaining is the number of elements not yet read.
func (r *Reader) Remaining() int { return r.left }

// Read64 fills dst with the next len(dst) elements (fewer at the end of the
// data) converted to float64, and returns how many it read. It returns
// io.EOF when no element is left, and an error wrapping
// io.ErrUnexpectedEOF when the file ends before its header said it would.
func (r *Reader) Read64(dst []float64) (int, error) {
	return readInto(r, dst)
}

// Read32 is Read64 for float32 destinations. Values out of float32 range
// become ±Inf, as in NumPy's astype.
func (r *Reader) Read32(dst []float32) (int, error) {
	return readInto(r, dst)
}

func readInto[T float32 | float64](r *Reader, dst []T) (int, error) {
	if r.left == 0 {
		if len(dst) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := min(len(dst), r.left)
	sz := r.Dtype.Size
	need := n * sz
	if cap(r.raw) < need {
		r.raw = make([]byte, need)
	}
	raw := r.raw[:need]
	if _, err := io.ReadFull(r.r, raw); err != nil {
		return 0, fmt.Errorf("%w: data truncated: %d of %d elements missing (%w)", ErrFormat, r.left, r.Len(), io.ErrUnexpectedEOF)
	}
	decode(dst[:n], raw, r.Dtype)
	r.left -= n
	return n, nil
}

// decode converts raw elements of type d into dst.
func decode[T float32 | float64](dst []T, raw []byte, d Dtype) {
	o := d.Order
	switch {
	case d.Kind == 'f' && d.Size == 4:
		for i := range dst {
			dst[i] = T(math.Float32frombits(o.Uint32(raw[4*i:])))
		}
	case d.Kind == 'f' && d.Size == 8:
		for i := range dst {
			dst[i] = T(math.Float64frombits(o.Uint64(raw[8*i:])))
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
	f, err := os.Open(path)
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
