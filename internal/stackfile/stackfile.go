// Package stackfile writes a stack of equal-sized float32 images, streamed
// one image or batch at a time, as the files other tools open: a MetaImage
// (.mha, one 3-D image, as ITK, SimpleITK and 3D Slicer read it) or a
// multi-page TIFF (one 32-bit IEEE float page per image, as ImageJ/Fiji,
// tifffile and libtiff read it). The stack's size is fixed up front, so
// both are written in one pass: a header, the pixels in order, and (TIFF)
// the pages' directories after them.
//
// Either file holds the pixels as one contiguous run of little-endian
// float32 values, image after image, row after row, from DataOffset on:
// the same bytes as an (n, rows, cols) float32 .npy file's data.
//
// Read reads stacks back: these files, .npy files, and the MetaImages and
// TIFFs that other tools write (see Read for what it reads).
package stackfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Stack is the size and pixel spacing of a stack: N images of Rows×Cols.
type Stack struct {
	N, Rows, Cols int
	// Pixel is the spacing in mm between columns and between rows; zero
	// when unknown (the images' pixels differ): the files then say 1 mm
	// (MetaImage) or carry no resolution (TIFF).
	Pixel [2]float64
}

func (s Stack) check() error {
	if s.N < 1 || s.Rows < 1 || s.Cols < 1 {
		return fmt.Errorf("stackfile: %d images of %dx%d: want at least one pixel", s.N, s.Rows, s.Cols)
	}
	for _, p := range s.Pixel {
		if p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
			return fmt.Errorf("stackfile: pixel spacing %g: want a positive, finite size or 0", p)
		}
	}
	if s.bytes() < 0 {
		return fmt.Errorf("stackfile: %d images of %dx%d: too large", s.N, s.Rows, s.Cols)
	}
	return nil
}

// image is the bytes of one image; bytes the whole stack's, −1 when it
// overflows.
func (s Stack) image() int64 { return 4 * int64(s.Rows) * int64(s.Cols) }

func (s Stack) bytes() int64 {
	img := s.image()
	if img/4/int64(s.Cols) != int64(s.Rows) || img > math.MaxInt64/int64(s.N) {
		return -1
	}
	return img * int64(s.N)
}

// Writer streams a stack's pixels into its file.
type Writer struct {
	w      *bufio.Writer
	total  int64 // the stack's values
	done   int64
	offset int64
	tail   func(w *bufio.Writer) error // what follows the pixels
	buf    []byte
}

// DataOffset is where the pixels start in the file.
func (w *Writer) DataOffset() int64 { return w.offset }

// Write32 appends images' pixels, row by row.
func (w *Writer) Write32(src []float32) error {
	if w.done+int64(len(src)) > w.total {
		return errors.New("stackfile: more pixels written than the stack holds")
	}
	const chunk = 8192
	if w.buf == nil {
		w.buf = make([]byte, 4*chunk)
	}
	for len(src) > 0 {
		n := min(len(src), chunk)
		b := w.buf[:4*n]
		for i, v := range src[:n] {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		if _, err := w.w.Write(b); err != nil {
			return err
		}
		w.done += int64(n)
		src = src[n:]
	}
	return nil
}

// Flush checks that every pixel was written, writes what follows them and
// flushes the buffer.
func (w *Writer) Flush() error {
	if w.done != w.total {
		return fmt.Errorf("stackfile: %d of %d pixels written", w.done, w.total)
	}
	if w.tail != nil {
		if err := w.tail(w.w); err != nil {
			return err
		}
		w.tail = nil
	}
	return w.w.Flush()
}

func newWriter(out io.Writer, s Stack, head []byte, tail func(*bufio.Writer) error) (*Writer, error) {
	w := &Writer{w: bufio.NewWriterSize(out, 1<<16), total: s.bytes() / 4, offset: int64(len(head)), tail: tail}
	if _, err := w.w.Write(head); err != nil {
		return nil, err
	}
	if err := w.w.Flush(); err != nil { // the header is there from the start
		return nil, err
	}
	return w, nil
}

// MHAHeader is the MetaImage header of s: a 3-D image of DimSize
// Cols Rows N (x, the fastest axis, along the columns; z the image
// number), MET_FLOAT, little endian, its pixels following the header
// (ElementDataFile = LOCAL). ElementSpacing is the pixel spacing (column,
// row) and 1 between images, Offset 0 0 0 and TransformMatrix the
// identity: each image in its own detector frame, pixel (0, 0) at the
// origin.
func MHAHeader(s Stack) []byte {
	du, dv := s.Pixel[0], s.Pixel[1]
	if du == 0 || dv == 0 {
		du, dv = 1, 1
	}
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	var b strings.Builder
	fmt.Fprintf(&b, "ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\nCompressedData = False\n")
	fmt.Fprintf(&b, "TransformMatrix = 1 0 0 0 1 0 0 0 1\nOffset = 0 0 0\nCenterOfRotation = 0 0 0\n")
	fmt.Fprintf(&b, "ElementSpacing = %s %s 1\nDimSize = %d %d %d\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n", g(du), g(dv), s.Cols, s.Rows, s.N)
	return []byte(b.String())
}

// NewMHA writes the MetaImage of s (MHAHeader, then the pixels) to out.
func NewMHA(out io.Writer, s Stack) (*Writer, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return newWriter(out, s, MHAHeader(s), nil)
}

// TIFF tags and types.
const (
	tImageWidth      = 256
	tImageLength     = 257
	tBitsPerSample   = 258
	tCompression     = 259
	tPhotometric     = 262
	tDescription     = 270
	tStripOffsets    = 273
	tSamplesPerPixel = 277
	tRowsPerStrip    = 278
	tStripByteCounts = 279
	tXResolution     = 282
	tYResolution     = 283
	tPlanarConfig    = 284
	tResolutionUnit  = 296
	tSampleFormat    = 339

	dtASCII    = 2
	dtShort    = 3
	dtLong     = 4
	dtRational = 5
	dtLong8    = 16
)

// classicLimit is the largest offset a classic TIFF holds; a stack whose
// file would reach it is written as BigTIFF.
const classicLimit = 1<<32 - 1

// TIFFOptions are NewTIFF's choices; the zero value is the usual one.
type TIFFOptions struct {
	// BigTIFF writes 64-bit offsets even when the file would fit a
	// classic TIFF's 4 GiB (which it otherwise writes).
	BigTIFF bool
}

// entry is one field of a TIFF directory: its values are shorts, longs
// or long8s (by typ) held as uint64, a rational's as numerator and
// denominator, or text.
type entry struct {
	tag, typ uint16
	vals     []uint64
	text     string
}

func (e entry) count() uint64 {
	switch e.typ {
	case dtASCII:
		return uint64(len(e.text) + 1)
	case dtRational:
		return uint64(len(e.vals) / 2)
	}
	return uint64(len(e.vals))
}

// encode is the entry's values as the file holds them.
func (e entry) encode() []byte {
	var b []byte
	switch e.typ {
	case dtASCII:
		b = append([]byte(e.text), 0)
	case dtShort:
		for _, v := range e.vals {
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		}
	case dtLong, dtRational:
		for _, v := range e.vals {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	case dtLong8:
		for _, v := range e.vals {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	return b
}

// rational is x as a fraction of two 32-bit numbers (about 9 digits), or
// false when x does not fit one.
func rational(x float64) (num, den uint64, ok bool) {
	if !(x > 0) || x >= classicLimit {
		return 0, 0, false
	}
	// The largest power of ten k with x·k and k below 2³².
	k := 1e9
	for x*k >= classicLimit {
		k /= 10
	}
	num, den = uint64(math.Round(x*k)), uint64(k)
	if num == 0 {
		return 0, 0, false
	}
	a, b := num, den
	for b != 0 {
		a, b = b, a%b
	}
	return num / a, den / a, true
}

// NewTIFF writes the TIFF of s to out: a little-endian multi-page TIFF,
// one page per image, each a single uncompressed strip of 32-bit IEEE
// floats (SampleFormat 3, BlackIsZero), the pages' pixels contiguous after
// the 8-byte header and their directories after the last page. The first
// page's ImageDescription is ImageJ's ("ImageJ=… images=N"), which lets
// ImageJ read the stack in one pass; with a pixel spacing, XResolution and
// YResolution are pixels per cm (ResolutionUnit 3). A file past 4 GiB is a
// BigTIFF (version 43, 64-bit offsets, 16-byte header).
func NewTIFF(out io.Writer, s Stack, opt TIFFOptions) (*Writer, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	big := opt.BigTIFF
	if !big {
		// The pixels, then per page a directory of at most 15 entries and
		// its values: the description and two rationals.
		ifds := int64(s.N) * (2 + 15*12 + 4 + 16)
		big = s.bytes() > classicLimit-8-ifds-int64(len(imageJ(s)))-64
	}
	var head []byte
	if big {
		head = []byte{'I', 'I', 43, 0, 8, 0, 0, 0}
		head = binary.LittleEndian.AppendUint64(head, uint64(16+s.bytes()))
	} else {
		head = []byte{'I', 'I', 42, 0}
		head = binary.LittleEndian.AppendUint32(head, uint32(8+s.bytes()))
	}
	start := int64(len(head))
	tail := func(w *bufio.Writer) error {
		pos := start + s.bytes() // where the next directory goes
		for i := range s.N {
			b, next := ifd(s, i, big, start+int64(i)*s.image(), pos)
			if _, err := w.Write(b); err != nil {
				return err
			}
			pos = next
		}
		return nil
	}
	return newWriter(out, s, head, tail)
}

// imageJ is the first page's description, as ImageJ writes a stack's.
func imageJ(s Stack) string {
	return fmt.Sprintf("ImageJ=1.11a\nimages=%d\nloop=false\n", s.N)
}

// ifd is the directory of page i, whose pixels start at data, placed at
// pos, followed by the values that do not fit its entries; next is where
// the next page's goes (its offset is written in this one, 0 after the
// last page).
func ifd(s Stack, i int, big bool, data, pos int64) (b []byte, next int64) {
	offType := uint16(dtLong)
	if big {
		offType = dtLong8
	}
	es := []entry{
		{tag: tImageWidth, typ: dtLong, vals: []uint64{uint64(s.Cols)}},
		{tag: tImageLength, typ: dtLong, vals: []uint64{uint64(s.Rows)}},
		{tag: tBitsPerSample, typ: dtShort, vals: []uint64{32}},
		{tag: tCompression, typ: dtShort, vals: []uint64{1}},
		{tag: tPhotometric, typ: dtShort, vals: []uint64{1}},
	}
	if i == 0 {
		es = append(es, entry{tag: tDescription, typ: dtASCII, text: imageJ(s)})
	}
	es = append(es,
		entry{tag: tStripOffsets, typ: offType, vals: []uint64{uint64(data)}},
		entry{tag: tSamplesPerPixel, typ: dtShort, vals: []uint64{1}},
		entry{tag: tRowsPerStrip, typ: dtLong, vals: []uint64{uint64(s.Rows)}},
		entry{tag: tStripByteCounts, typ: offType, vals: []uint64{uint64(s.image())}})
	xn, xd, xok := rational(10 / s.Pixel[0]) // pixels per cm
	yn, yd, yok := rational(10 / s.Pixel[1])
	res := xok && yok
	if res {
		es = append(es,
			entry{tag: tXResolution, typ: dtRational, vals: []uint64{xn, xd}},
			entry{tag: tYResolution, typ: dtRational, vals: []uint64{yn, yd}})
	}
	es = append(es, entry{tag: tPlanarConfig, typ: dtShort, vals: []uint64{1}})
	if res {
		es = append(es, entry{tag: tResolutionUnit, typ: dtShort, vals: []uint64{3}})
	}
	es = append(es, entry{tag: tSampleFormat, typ: dtShort, vals: []uint64{3}})

	// Classic: a 2-byte count, 12-byte entries with 4 bytes of value,
	// a 4-byte next offset; BigTIFF: 8, 20 with 8, and 8.
	cnt, size, inline, nextSize := 2, 12, 4, 4
	if big {
		cnt, size, inline, nextSize = 8, 20, 8, 8
	}
	extra := pos + int64(cnt+len(es)*size+nextSize) // the values that do not fit inline
	var more []byte
	put := func(v uint64, n int) {
		if n == 4 {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		} else {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	if big {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(es)))
	} else {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(es)))
	}
	for _, e := range es {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.typ)
		put(e.count(), inline)
		v := e.encode()
		if len(v) <= inline {
			b = append(b, v...)
			b = append(b, make([]byte, inline-len(v))...)
			continue
		}
		if len(more)%2 == 1 { // values start on a word boundary
			more = append(more, 0)
		}
		put(uint64(extra)+uint64(len(more)), inline)
		more = append(more, v...)
	}
	if len(more)%2 == 1 {
		more = append(more, 0)
	}
	next = extra + int64(len(more))
	if i == s.N-1 {
		put(0, nextSize)
	} else {
		put(uint64(next), nextSize)
	}
	return append(b, more...), next
}
