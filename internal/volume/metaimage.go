package volume

import (
	"fmt"
	"io"
	"os"
)

// MetaImage is a MetaImage file (.mha, or a .mhd and its data file) open
// for its elements as they are stored, for images that are not volumes:
// one 2-D image (NDims = 2), or a stack of them as a 3-D image. It reads
// the header and checks the data as Load does, but keeps the elements'
// values (a MET_DOUBLE is not rounded to float32, a NaN is not refused)
// and reads no placement besides the spacing.
type MetaImage struct {
	// Dims is DimSize, x (the fastest axis) first: 2 or 3 sizes.
	Dims []int
	// Spacing is ElementSpacing (ElementSize without it), one per axis;
	// nil when the header gives neither.
	Spacing []float64
	// Type is ElementType as NumPy names it: uint8, int16, float32, ….
	Type string

	path string
	f    *os.File
	data io.Reader
	el   element
	done func()
	left int64 // elements not yet read
	buf  []byte
}

// OpenMetaImage opens the MetaImage at path and checks that its data holds
// the elements its header claims. Warnings (more data than that) go to
// warn when it is not nil.
func OpenMetaImage(path string, warn io.Writer) (*MetaImage, error) {
	f, br, h, err := openMetaHeader(path)
	if err != nil {
		return nil, err
	}
	data, el, done, err := openMetaData(path, f, br, h, warn)
	if err != nil {
		f.Close()
		return nil, err
	}
	m := &MetaImage{Dims: h.dims[:h.ndims:h.ndims], Type: h.etype, path: path, f: f, data: data, el: el, done: done,
		left: int64(h.dims[0]) * int64(h.dims[1]) * int64(h.dims[2])}
	if h.spacingGiven {
		m.Spacing = h.spacing[:h.ndims:h.ndims]
	}
	return m, nil
}

// Read64 fills dst with the next len(dst) elements, x fastest, converted
// to float64 (exactly: every element type is a float64). Asking for more
// elements than are left is an error, and so is data that ends early.
func (m *MetaImage) Read64(dst []float64) error {
	if int64(len(dst)) > m.left {
		return fmt.Errorf("%w: %s: %d elements asked for, %d left", ErrVolume, m.path, len(dst), m.left)
	}
	const chunk = 1 << 14
	sz := m.el.size
	if m.buf == nil {
		m.buf = make([]byte, chunk*sz)
	}
	for len(dst) > 0 {
		n := min(len(dst), chunk)
		b := m.buf[:n*sz]
		if _, err := io.ReadFull(m.data, b); err != nil {
			return fmt.Errorf("%w: %s: data truncated (%v)", ErrVolume, m.path, err)
		}
		for i := range dst[:n] {
			dst[i] = m.el.decode(b[i*sz:])
		}
		m.left -= int64(n)
		dst = dst[n:]
	}
	return nil
}

// Close closes the file and its data file.
func (m *MetaImage) Close() error {
	m.done()
	return m.f.Close()
}
