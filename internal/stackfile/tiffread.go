package stackfile

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// More TIFF tags and types, those the reader checks.
const (
	tPredictor       = 317
	tTileWidth       = 322
	tTileOffsets     = 324
	dtIFD            = 13
	dtIFD8           = 18
	dtByte           = 1
	maxEntries       = 1 << 16 // a directory's entries a reader looks at
	defaultRowsStrip = 1<<32 - 1
)

// typeSize is the bytes of one value of TIFF type typ, 0 for a type the
// reader does not know (its entries are skipped, as TIFF 6.0 asks).
func typeSize(typ uint16) int64 {
	switch typ {
	case 1, 2, 6, 7: // BYTE, ASCII, SBYTE, UNDEFINED
		return 1
	case 3, 8: // SHORT, SSHORT
		return 2
	case 4, 9, 11, dtIFD: // LONG, SLONG, FLOAT, IFD
		return 4
	case 5, 10, 12, dtLong8, 17, dtIFD8: // RATIONAL, SRATIONAL, DOUBLE, LONG8, SLONG8, IFD8
		return 8
	}
	return 0
}

// tiffFile is a TIFF being read through ReadAt: every read is checked
// against the file's size first.
type tiffFile struct {
	path string
	r    io.ReaderAt
	size int64
	o    binary.ByteOrder
	big  bool // BigTIFF: 8-byte counts and offsets
}

func (t *tiffFile) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{t.path}, args...)...)
}

// at reads n bytes at off, which must lie inside the file.
func (t *tiffFile) at(off, n int64, what string) ([]byte, error) {
	if off < 0 || n < 0 || off > t.size || n > t.size-off {
		return nil, t.errorf("%s at byte %d (%d bytes) lies past the end of the file (%d bytes): truncated or corrupt", what, off, n, t.size)
	}
	b := make([]byte, n)
	if _, err := t.r.ReadAt(b, off); err != nil {
		return nil, t.errorf("reading %s: %w", what, err)
	}
	return b, nil
}

// word reads an offset or count: 8 bytes in a BigTIFF, else 4.
func (t *tiffFile) word(b []byte) uint64 {
	if t.big {
		return t.o.Uint64(b)
	}
	return uint64(t.o.Uint32(b))
}

// offset is an offset read from the file, as an int64 (past the file's
// end when it does not fit one).
func offset(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// field is a directory entry: its type, count and where its values lie.
type field struct {
	typ   uint16
	count uint64
	off   int64 // the values' offset in the file
}

// header reads the byte order, version and first directory's offset.
func (t *tiffFile) header() (int64, error) {
	b, err := t.at(0, 8, "the TIFF header")
	if err != nil {
		return 0, err
	}
	switch string(b[:2]) {
	case "II":
		t.o = binary.LittleEndian
	case "MM":
		t.o = binary.BigEndian
	default:
		return 0, t.errorf("not a TIFF file (it starts %q, want \"II\" or \"MM\")", b[:2])
	}
	switch v := t.o.Uint16(b[2:]); v {
	case 42:
		return int64(t.o.Uint32(b[4:])), nil
	case 43:
		t.big = true
		b, err := t.at(0, 16, "the BigTIFF header")
		if err != nil {
			return 0, err
		}
		if t.o.Uint16(b[4:]) != 8 || t.o.Uint16(b[6:]) != 0 {
			return 0, t.errorf("BigTIFF header with %d-byte offsets, want 8", t.o.Uint16(b[4:]))
		}
		return offset(t.o.Uint64(b[8:])), nil
	default:
		return 0, t.errorf("not a TIFF file (version %d, want 42, or 43 for a BigTIFF)", v)
	}
}

// directory reads the directory at off: its entries by tag (the first of
// a tag given twice), its bytes, and the next directory's offset.
func (t *tiffFile) directory(off int64) (map[uint16]field, int64, int64, error) {
	cnt, entry, word := int64(2), int64(12), int64(4)
	if t.big {
		cnt, entry, word = 8, 20, 8
	}
	b, err := t.at(off, cnt, "a page directory")
	if err != nil {
		return nil, 0, 0, err
	}
	n := uint64(t.o.Uint16(b))
	if t.big {
		n = t.o.Uint64(b)
	}
	if n == 0 || n > maxEntries {
		return nil, 0, 0, t.errorf("a page directory at byte %d holds %d entries: corrupt", off, n)
	}
	size := cnt + int64(n)*entry + word
	b, err = t.at(off, size, "a page directory")
	if err != nil {
		return nil, 0, 0, err
	}
	fs := make(map[uint16]field, n)
	for i := range int64(n) {
		e := b[cnt+i*entry:]
		tag, typ := t.o.Uint16(e), t.o.Uint16(e[2:])
		ts := typeSize(typ)
		if _, dup := fs[tag]; dup || ts == 0 {
			continue
		}
		f := field{typ: typ, count: t.word(e[4:]), off: off + cnt + i*entry + 4 + word}
		if f.count > uint64(t.size)/uint64(ts) {
			f.off = math.MaxInt64 // past the end: an error when read
		} else if int64(f.count)*ts > word {
			f.off = offset(t.word(e[4+word:]))
		}
		fs[tag] = f
	}
	return fs, size, offset(t.word(b[size-word:])), nil
}

// uints reads an entry's values as unsigned integers: BYTE, SHORT, LONG,
// LONG8 or IFD types.
func (t *tiffFile) uints(f field, name string) ([]uint64, error) {
	ts := typeSize(f.typ)
	switch f.typ {
	case dtByte, dtShort, dtLong, dtLong8, dtIFD, dtIFD8:
	default:
		return nil, t.errorf("%s has TIFF type %d, want an unsigned integer", name, f.typ)
	}
	if f.count > uint64(t.size)/uint64(ts) {
		return nil, t.errorf("%s holds %d values, more than the file's %d bytes: corrupt", name, f.count, t.size)
	}
	b, err := t.at(f.off, int64(f.count)*ts, name)
	if err != nil {
		return nil, err
	}
	v := make([]uint64, f.count)
	for i := range v {
		switch ts {
		case 1:
			v[i] = uint64(b[i])
		case 2:
			v[i] = uint64(t.o.Uint16(b[2*i:]))
		case 4:
			v[i] = uint64(t.o.Uint32(b[4*i:]))
		case 8:
			v[i] = t.o.Uint64(b[8*i:])
		}
	}
	return v, nil
}

// scalar is the first value of fs[tag], or def when the page lacks it.
func (t *tiffFile) scalar(fs map[uint16]field, tag uint16, name string, def uint64) (uint64, error) {
	f, ok := fs[tag]
	if !ok {
		return def, nil
	}
	if f.count == 0 {
		return 0, t.errorf("%s has no value", name)
	}
	f.count = 1
	v, err := t.uints(f, name)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// page is one page's layout: what its pixels are and where its strips lie.
type page struct {
	cols, rows   uint64
	bits, format uint64 // BitsPerSample, SampleFormat (1 unsigned, 2 signed, 3 float)
	rowsPerStrip uint64
	offsets      field
	counts       field
	hasCounts    bool
	fields       map[uint16]field // the first page's are kept, for its resolution
	bytes        int64            // the pixels' bytes
}

// sampleNames says what samples of a SampleFormat are.
var sampleNames = map[uint64]string{1: "unsigned integer", 2: "signed integer", 3: "float"}

// compressions names common TIFF compressions for the message refusing them.
var compressions = map[uint64]string{2: "CCITT RLE", 3: "CCITT G3", 4: "CCITT G4", 5: "LZW", 6: "old JPEG", 7: "JPEG",
	8: "Deflate", 32946: "Deflate", 32773: "PackBits", 34925: "LZMA", 50000: "Zstandard", 50001: "WebP", 34887: "LERC"}

// parsePage reads the layout of page i (from 1) from its directory,
// refusing what the reader does not read.
func (t *tiffFile) parsePage(i int, fs map[uint16]field) (page, error) {
	var p page
	_, tw := fs[tTileWidth]
	if _, to := fs[tTileOffsets]; tw || to {
		return p, t.errorf("page %d is tiled: tiled TIFF is not supported; save the images in strips (tifffile's default)", i)
	}
	type want struct {
		tag  uint16
		name string
		def  uint64
		dst  *uint64
	}
	var comp, spp, photo, pred uint64
	for _, w := range []want{
		{tCompression, "Compression", 1, &comp},
		{tSamplesPerPixel, "SamplesPerPixel", 1, &spp},
		{tPhotometric, "PhotometricInterpretation", 1, &photo},
		{tPredictor, "Predictor", 1, &pred},
		{tBitsPerSample, "BitsPerSample", 1, &p.bits},
		{tSampleFormat, "SampleFormat", 1, &p.format},
		{tImageWidth, "ImageWidth", 0, &p.cols},
		{tImageLength, "ImageLength", 0, &p.rows},
		{tRowsPerStrip, "RowsPerStrip", defaultRowsStrip, &p.rowsPerStrip},
	} {
		v, err := t.scalar(fs, w.tag, fmt.Sprintf("page %d's %s", i, w.name), w.def)
		if err != nil {
			return p, err
		}
		*w.dst = v
	}
	switch {
	case comp != 1:
		name := compressions[comp]
		if name == "" {
			name = "Compression = " + strconv.FormatUint(comp, 10)
		}
		return p, t.errorf("page %d is compressed (%s): only uncompressed TIFF is supported", i, name)
	case pred != 1:
		return p, t.errorf("page %d has Predictor = %d: only uncompressed TIFF without a predictor is supported", i, pred)
	case spp != 1:
		return p, t.errorf("page %d has %d samples per pixel (RGB, or with alpha): only one (grey) is supported", i, spp)
	case photo > 1:
		return p, t.errorf("page %d has PhotometricInterpretation = %d (colour or palette): only grey images are supported", i, photo)
	}
	if _, ok := sampleNames[p.format]; !ok {
		return p, t.errorf("page %d has SampleFormat = %d: only unsigned or signed integers (1, 2) and floats (3) are supported", i, p.format)
	}
	if sampleSize(p.format, p.bits) == 0 {
		return p, t.errorf("page %d holds %d-bit %s samples: only 8-, 16- or 32-bit integers and 32- or 64-bit floats are supported",
			i, p.bits, sampleNames[p.format])
	}
	if p.cols == 0 || p.rows == 0 {
		return p, t.errorf("page %d is %dx%d: it lacks ImageLength or ImageWidth, or is empty", i, p.rows, p.cols)
	}
	p.rowsPerStrip = min(max(p.rowsPerStrip, 1), p.rows)
	var ok bool
	if p.offsets, ok = fs[tStripOffsets]; !ok {
		return p, t.errorf("page %d has no StripOffsets", i)
	}
	p.counts, p.hasCounts = fs[tStripByteCounts]
	// The page's bytes, checked against the file's size without overflow.
	sz := sampleSize(p.format, p.bits)
	if p.cols > uint64(t.size)/sz || p.rows > uint64(t.size)/sz/p.cols {
		return p, t.errorf("page %d is %dx%d of %d-bit samples: more than the file's %d bytes: truncated or corrupt", i, p.rows, p.cols, p.bits, t.size)
	}
	p.bytes = int64(p.cols * p.rows * sz)
	return p, nil
}

// sampleSize is the bytes of a sample the reader decodes, 0 for others.
func sampleSize(format, bits uint64) uint64 {
	switch {
	case (format == 1 || format == 2) && (bits == 8 || bits == 16 || bits == 32),
		format == 3 && (bits == 32 || bits == 64):
		return bits / 8
	}
	return 0
}

// strips is where page p's strips lie and the bytes each must hold.
func (t *tiffFile) strips(i int, p page) (offs []uint64, sizes []int64, err error) {
	n := (p.rows + p.rowsPerStrip - 1) / p.rowsPerStrip
	if offs, err = t.uints(p.offsets, fmt.Sprintf("page %d's StripOffsets", i)); err != nil {
		return nil, nil, err
	}
	if uint64(len(offs)) < n {
		return nil, nil, t.errorf("page %d has %d strips, want %d (%d rows, %d per strip)", i, len(offs), n, p.rows, p.rowsPerStrip)
	}
	var counts []uint64
	if p.hasCounts {
		if counts, err = t.uints(p.counts, fmt.Sprintf("page %d's StripByteCounts", i)); err != nil {
			return nil, nil, err
		}
		if uint64(len(counts)) < n {
			return nil, nil, t.errorf("page %d has %d strip byte counts, want %d", i, len(counts), n)
		}
	}
	row := p.bytes / int64(p.rows)
	sizes = make([]int64, n)
	for s := range sizes {
		rows := min(p.rowsPerStrip, p.rows-uint64(s)*p.rowsPerStrip)
		sizes[s] = int64(rows) * row
		if counts != nil && counts[s] < uint64(sizes[s]) {
			return nil, nil, t.errorf("page %d's strip %d holds %d bytes, want %d: truncated or corrupt", i, s, counts[s], sizes[s])
		}
	}
	return offs[:n], sizes, nil
}

// readPage decodes page p's pixels into dst.
func (t *tiffFile) readPage(i int, p page, dst []float64, buf []byte) ([]byte, error) {
	offs, sizes, err := t.strips(i, p)
	if err != nil {
		return buf, err
	}
	sz := int64(sampleSize(p.format, p.bits))
	for s, off := range offs {
		o, n := offset(off), sizes[s]
		if o > t.size || n > t.size-o {
			return buf, t.errorf("page %d's strip %d at byte %d (%d bytes) lies past the end of the file (%d bytes): truncated or corrupt", i, s, o, n, t.size)
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if _, err := t.r.ReadAt(b, o); err != nil {
			return buf, t.errorf("reading page %d's strip %d: %w", i, s, err)
		}
		decodeSamples(dst[:n/sz], b, t.o, p.format, p.bits)
		dst = dst[n/sz:]
	}
	return buf, nil
}

// decodeSamples converts the samples in b, of a format and size
// sampleSize accepts, into dst.
func decodeSamples(dst []float64, b []byte, o binary.ByteOrder, format, bits uint64) {
	switch {
	case format == 3 && bits == 32:
		for i := range dst {
			dst[i] = float64(math.Float32frombits(o.Uint32(b[4*i:])))
		}
	case format == 3 && bits == 64:
		for i := range dst {
			dst[i] = math.Float64frombits(o.Uint64(b[8*i:]))
		}
	case format == 1 && bits == 8:
		for i := range dst {
			dst[i] = float64(b[i])
		}
	case format == 2 && bits == 8:
		for i := range dst {
			dst[i] = float64(int8(b[i]))
		}
	case format == 1 && bits == 16:
		for i := range dst {
			dst[i] = float64(o.Uint16(b[2*i:]))
		}
	case format == 2 && bits == 16:
		for i := range dst {
			dst[i] = float64(int16(o.Uint16(b[2*i:])))
		}
	case format == 1 && bits == 32:
		for i := range dst {
			dst[i] = float64(o.Uint32(b[4*i:]))
		}
	case format == 2 && bits == 32:
		for i := range dst {
			dst[i] = float64(int32(o.Uint32(b[4*i:])))
		}
	default:
		panic("stackfile: decode of unchecked TIFF samples")
	}
}

// pages reads the chain of page directories from off, checking that the
// pages are alike and that their directories and pixels fit the file
// together (as they must, lying apart), which bounds what is allocated
// for them by the file's size.
func (t *tiffFile) pages(off int64) ([]page, error) {
	var ps []page
	seen := map[int64]int{}
	total := int64(8)
	for off != 0 {
		i := len(ps) + 1
		if j, loop := seen[off]; loop {
			return nil, t.errorf("page %d's directory is page %d's: the chain of pages loops", i, j)
		}
		seen[off] = i
		fs, size, next, err := t.directory(off)
		if err != nil {
			return nil, err
		}
		p, err := t.parsePage(i, fs)
		if err != nil {
			return nil, err
		}
		if len(ps) > 0 && (p.cols != ps[0].cols || p.rows != ps[0].rows) {
			return nil, t.errorf("page %d is %dx%d, page 1 %dx%d: every page must be the same size", i, p.rows, p.cols, ps[0].rows, ps[0].cols)
		}
		if total += size + p.bytes; total > t.size {
			return nil, t.errorf("%d pages of %dx%d and their directories take more than the file's %d bytes: truncated or corrupt", i, p.rows, p.cols, t.size)
		}
		if len(ps) == 0 {
			p.fields = fs
		}
		ps = append(ps, p)
		off = next
	}
	if len(ps) == 0 {
		return nil, t.errorf("the TIFF holds no page")
	}
	return ps, nil
}

// readTIFF reads a TIFF of one page per image.
func readTIFF(path string) (Images, error) {
	f, err := npy.OpenFile(path)
	if err != nil {
		return Images{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Images{}, err
	}
	t := &tiffFile{path: path, r: f, size: st.Size()}
	first, err := t.header()
	if err != nil {
		return Images{}, err
	}
	ps, err := t.pages(first)
	if err != nil {
		return Images{}, err
	}
	desc := t.description(ps[0].fields)
	if n, ok := imageJCount(desc); ok && n > len(ps) {
		return Images{}, t.errorf("its ImageJ description says %d images, the file has directories for %d: ImageJ files holding images past their pages' directories are not supported", n, len(ps))
	}
	var im Images
	if err := im.shape(path, len(ps), int(ps[0].rows), int(ps[0].cols)); err != nil {
		return Images{}, err
	}
	im.Pixel = t.spacing(ps[0].fields, desc)
	im.Pix = make([]float64, im.N*im.Rows*im.Cols)
	var buf []byte
	for i, p := range ps {
		if buf, err = t.readPage(i+1, p, im.Pix[i*im.Rows*im.Cols:], buf); err != nil {
			return Images{}, err
		}
	}
	return im, nil
}

// description is the page's ImageDescription, "" when it has none or it
// cannot be read.
func (t *tiffFile) description(fs map[uint16]field) string {
	f, ok := fs[tDescription]
	if !ok || f.typ != dtASCII || f.count > 1<<20 {
		return ""
	}
	b, err := t.at(f.off, int64(f.count), "ImageDescription")
	if err != nil {
		return ""
	}
	s, _, _ := strings.Cut(string(b), "\x00")
	return s
}

// imageJValue reads key=value from an ImageJ description ("ImageJ=1.53t\n
// images=3\nunit=mm\n…").
func imageJValue(desc, key string) (string, bool) {
	if !strings.HasPrefix(desc, "ImageJ=") {
		return "", false
	}
	for _, line := range strings.Split(desc, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// imageJCount is the number of images an ImageJ description gives.
func imageJCount(desc string) (int, bool) {
	v, ok := imageJValue(desc, "images")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// imageJUnits are the mm in one of ImageJ's units of length.
var imageJUnits = map[string]float64{
	"mm": 1, "cm": 10, "m": 1000, "meter": 1000, "inch": 25.4, "nm": 1e-6,
	"micron": 1e-3, "um": 1e-3, "µm": 1e-3, `\u00B5m`: 1e-3, "microns": 1e-3,
}

// spacing is the pixel spacing in mm that the page's XResolution and
// YResolution (pixels per unit) give: per inch or cm by ResolutionUnit
// (inch when it is missing, as TIFF 6.0 says), or, with no unit (1), per
// the unit in an ImageJ description; 0 when the file says none.
func (t *tiffFile) spacing(fs map[uint16]field, desc string) [2]float64 {
	unit, err := t.scalar(fs, tResolutionUnit, "ResolutionUnit", 2)
	if err != nil {
		return [2]float64{}
	}
	var mm float64
	switch unit {
	case 2:
		mm = 25.4
	case 3:
		mm = 10
	case 1:
		u, _ := imageJValue(desc, "unit")
		mm = imageJUnits[u]
	}
	x, y := t.rational(fs, tXResolution), t.rational(fs, tYResolution)
	sx, sy := mm/x, mm/y
	if !(mm > 0 && sx > 0 && sy > 0) || math.IsInf(sx, 0) || math.IsInf(sy, 0) {
		return [2]float64{}
	}
	return [2]float64{sx, sy}
}

// rational is the value of a RATIONAL entry, 0 when it is missing or not
// one.
func (t *tiffFile) rational(fs map[uint16]field, tag uint16) float64 {
	f, ok := fs[tag]
	if !ok || f.typ != dtRational || f.count < 1 {
		return 0
	}
	b, err := t.at(f.off, 8, "a resolution")
	if err != nil {
		return 0
	}
	num, den := t.o.Uint32(b), t.o.Uint32(b[4:])
	if den == 0 {
		return 0
	}
	return float64(num) / float64(den)
}
