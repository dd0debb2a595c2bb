package npy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"
)

// Writer streams elements into a .npy file whose shape is fixed up front.
type Writer struct {
	w     *bufio.Writer
	dtype Dtype
	total int
	done  int
	buf   []byte
}

// WriterBytes is the memory a Writer holds besides what it is given: its
// buffer of writeBuf bytes and, for values it converts, a buffer of
// writeChunk values of up to 8 bytes. Callers count it among a run's
// staging buffers.
const WriterBytes = writeBuf + writeChunk*8

const (
	writeBuf   = 1 << 16 // bytes buffered before they go to the file
	writeChunk = 8192    // values converted at a time
)

// NewWriter writes the header for an array of the given little-endian
// float32, float64, int32 or int64 dtype and shape, and returns a Writer
// for its elements in C order.
func NewWriter(w io.Writer, dtype Dtype, shape []int) (*Writer, error) {
	if dtype != Float32 && dtype != Float64 && dtype != Int32 && dtype != Int64 {
		return nil, fmt.Errorf("%w for writing: %s", ErrDtype, dtype)
	}
	hdr := EncodeHeader(dtype, shape)
	bw := bufio.NewWriterSize(w, writeBuf)
	if _, err := bw.Write(hdr); err != nil {
		return nil, err
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	return &Writer{w: bw, dtype: dtype, total: n}, nil
}

// EncodeHeader returns the magic string, version, length and dictionary of
// a .npy header, padded with spaces and a final newline so that the data
// starts at a multiple of 64 bytes.
func EncodeHeader(dtype Dtype, shape []int) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", dtype, ShapeString(shape))
	major, prefix := 1, 10
	if len(dict)+1+prefix > math.MaxUint16 {
		major, prefix = 2, 12
	}
	pad := (64 - (prefix+len(dict)+1)%64) % 64
	hlen := len(dict) + pad + 1
	out := make([]byte, 0, prefix+hlen)
	out = append(out, magic...)
	out = append(out, byte(major), 0)
	if major == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(hlen))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(hlen))
	}
	out = append(out, dict...)
	for range pad {
		out = append(out, ' ')
	}
	return append(out, '\n')
}

var errOverflow = errors.New("npy: more elements written than the shape holds")

// Write32 appends float32 elements (converted when the file is float64;
// into an integer file each must be an integer it holds).
func (w *Writer) Write32(src []float32) error { return write(w, src) }

// Write64 appends float64 elements (rounded when the file is float32; into
// an integer file each must be an integer it holds).
func (w *Writer) Write64(src []float64) error { return write(w, src) }

// WriteInt32 appends int32 elements to an int32 or int64 file.
func (w *Writer) WriteInt32(src []int32) error { return writeInt(w, src) }

// WriteInt64 appends int64 elements to an int64 file, or an int32 file
// when each fits.
func (w *Writer) WriteInt64(src []int64) error { return writeInt(w, src) }

// writeRaw writes src, elements of the file's own type, as their bytes
// (on a little-endian host; false otherwise), without a copy.
func writeRaw[T float32 | float64 | int32 | int64](w *Writer, src []T) (bool, error) {
	var zero T
	if !LittleEndianHost || int(unsafe.Sizeof(zero)) != w.dtype.Size {
		return false, nil
	}
	if w.done+len(src) > w.total {
		return true, errOverflow
	}
	if len(src) == 0 {
		return true, nil
	}
	if _, err := w.w.Write(unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), len(src)*w.dtype.Size)); err != nil {
		return true, err
	}
	w.done += len(src)
	return true, nil
}

func writeInt[T int32 | int64](w *Writer, src []T) error {
	if w.dtype.Kind != 'i' {
		return fmt.Errorf("%w: integer elements into a %s file", ErrDtype, w.dtype)
	}
	if ok, err := writeRaw(w, src); ok {
		return err
	}
	if w.done+len(src) > w.total {
		return errOverflow
	}
	var b [8]byte
	for _, v := range src {
		if w.dtype.Size == 4 {
			if int64(v) != int64(int32(v)) {
				return fmt.Errorf("%w: %d does not fit an int32 file", ErrDtype, v)
			}
			binary.LittleEndian.PutUint32(b[:], uint32(v))
		} else {
			binary.LittleEndian.PutUint64(b[:], uint64(v))
		}
		if _, err := w.w.Write(b[:w.dtype.Size]); err != nil {
			return err
		}
	}
	w.done += len(src)
	return nil
}

func write[T float32 | float64](w *Writer, src []T) error {
	if w.dtype.Kind == 'f' {
		if ok, err := writeRaw(w, src); ok {
			return err
		}
	}
	if w.done+len(src) > w.total {
		return errOverflow
	}
	const chunk = writeChunk
	sz := w.dtype.Size
	if cap(w.buf) < chunk*sz {
		w.buf = make([]byte, chunk*sz)
	}
	for len(src) > 0 {
		n := min(len(src), chunk)
		b := w.buf[:n*sz]
		switch {
		case w.dtype.Kind == 'i':
			lim := math.Ldexp(1, 8*sz-1) // 2^31 or 2^63
			for i, v := range src[:n] {
				f := float64(v)
				if f != math.Trunc(f) || f < -lim || f >= lim {
					return fmt.Errorf("%w: %v is not an integer a %s file holds", ErrDtype, f, w.dtype.Name())
				}
				if sz == 4 {
					binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(f)))
				} else {
					binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(f)))
				}
			}
		case sz == 4:
			for i, v := range src[:n] {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
			}
		default:
			for i, v := range src[:n] {
				binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(v)))
			}
		}
		if _, err := w.w.Write(b); err != nil {
			return err
		}
		w.done += n
		src = src[n:]
	}
	return nil
}

// Flush writes buffered data and checks that every element the shape
// promises was written.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return err
	}
	if w.done != w.total {
		return fmt.Errorf("npy: %d of %d elements written", w.done, w.total)
	}
	return nil
}
