package stackfile

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

// randomPix is n random values, fresh each run, with −0, NaN and ±Inf
// among them (the reader passes them on as they are).
func randomPix(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * 1000)
	}
	for i, x := range []float64{math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1)} {
		if n > 4*i+4 {
			v[rng.IntN(n/4)+i*(n/4)] = float32(x)
		}
	}
	return v
}

func newRNG(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 1))
}

// same reports whether got holds want's values bit for bit, and where not.
func same[T float32 | float64 | int16](t *testing.T, name string, got []float64, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d pixels, want %d", name, len(got), len(want))
	}
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(float64(want[i])) {
			t.Fatalf("%s: pixel %d is %v, want %v", name, i, got[i], want[i])
		}
	}
}

// writeStack writes v to path through a Writer from make.
func writeStack(t testing.TB, path string, v []float32, make func(*os.File) (*Writer, error)) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := make(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write32(v); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// writeNPY writes v as a .npy of the shape and dtype (Float32 or Float64).
func writeNPY(t testing.TB, path string, v []float32, dtype npy.Dtype, shape ...int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := npy.NewWriter(f, dtype, shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write32(v); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string, n, rows, cols int) Images {
	t.Helper()
	im, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if im.N != n || im.Rows != rows || im.Cols != cols {
		t.Fatalf("%s: %d images of %dx%d, want %d of %dx%d", path, im.N, im.Rows, im.Cols, n, rows, cols)
	}
	return im
}

// closeTo checks a spacing read from a TIFF's rationals (about 9 digits).
func closeTo(got, want [2]float64) bool {
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-8*want[i] || (want[i] == 0) != (got[i] == 0) {
			return false
		}
	}
	return true
}

// What NewMHA, NewTIFF and package npy's writer write, Read reads back
// bit for bit, of odd sizes, with the spacing the file says.
func TestReadRoundTrip(t *testing.T) {
	rng := newRNG(t)
	dir := t.TempDir()
	for _, s := range []Stack{
		{N: 3, Rows: 17, Cols: 23, Pixel: [2]float64{0.388, 1.5}},
		{N: 1, Rows: 1, Cols: 1, Pixel: [2]float64{2, 0.7}},
		{N: 2, Rows: 1, Cols: 29},
		{N: 5, Rows: 31, Cols: 1, Pixel: [2]float64{0.0123, 7}},
	} {
		name := fmt.Sprintf("%dx%dx%d", s.N, s.Rows, s.Cols)
		v := randomPix(rng, s.N*s.Rows*s.Cols)
		p := func(ext string) string { return filepath.Join(dir, name+ext) }
		t.Run(name, func(t *testing.T) {
			writeStack(t, p(".mha"), v, func(f *os.File) (*Writer, error) { return NewMHA(f, s) })
			im := read(t, p(".mha"), s.N, s.Rows, s.Cols)
			same(t, "mha", im.Pix, v)
			if want := s.Pixel; im.Pixel != want && !(want == [2]float64{} && im.Pixel == [2]float64{1, 1}) {
				t.Errorf("mha: spacing %v, want %v", im.Pixel, want)
			}
			for _, big := range []bool{false, true} {
				writeStack(t, p(".tiff"), v, func(f *os.File) (*Writer, error) { return NewTIFF(f, s, TIFFOptions{BigTIFF: big}) })
				im = read(t, p(".tiff"), s.N, s.Rows, s.Cols)
				same(t, "tiff", im.Pix, v)
				if !closeTo(im.Pixel, s.Pixel) {
					t.Errorf("tiff (BigTIFF %v): spacing %v, want %v", big, im.Pixel, s.Pixel)
				}
			}
			for _, dt := range []npy.Dtype{npy.Float32, npy.Float64} {
				writeNPY(t, p(".NPY"), v, dt, s.N, s.Rows, s.Cols) // the extension in any case
				im = read(t, p(".NPY"), s.N, s.Rows, s.Cols)
				same(t, "npy "+dt.Name(), im.Pix, v)
				if im.Pixel != [2]float64{} {
					t.Errorf("npy: spacing %v, want none", im.Pixel)
				}
			}
		})
	}
}

// One image: a 2-D .npy and 2-D MetaImages (MET_DOUBLE in the file,
// MET_SHORT big-endian in a zlib-compressed data file).
func TestReadOneImage(t *testing.T) {
	rng := newRNG(t)
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	const rows, cols = 13, 19
	v := randomPix(rng, rows*cols)

	writeNPY(t, p("one.npy"), v, npy.Float32, rows, cols)
	same(t, "2-D npy", read(t, p("one.npy"), 1, rows, cols).Pix, v)

	d := make([]float64, rows*cols)
	var raw []byte
	for i := range d {
		d[i] = rng.NormFloat64() * 1e-3
		raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(d[i]))
	}
	hdr := fmt.Sprintf("ObjectType = Image\nNDims = 2\nBinaryData = True\nBinaryDataByteOrderMSB = False\nCompressedData = False\n"+
		"TransformMatrix = 1 0 0 1\nOffset = 0 0\nCenterOfRotation = 0 0\nAnatomicalOrientation = RA\n"+
		"ElementSpacing = 0.139 0.25\nDimSize = %d %d\nElementType = MET_DOUBLE\nElementDataFile = LOCAL\n", cols, rows)
	os.WriteFile(p("one.mha"), append([]byte(hdr), raw...), 0o644)
	im := read(t, p("one.mha"), 1, rows, cols)
	same(t, "2-D MET_DOUBLE", im.Pix, d)
	if im.Pixel != [2]float64{0.139, 0.25} {
		t.Errorf("2-D mha: spacing %v, want [0.139 0.25]", im.Pixel)
	}

	const n = 3
	s := make([]int16, n*rows*cols)
	raw = raw[:0]
	for i := range s {
		s[i] = int16(rng.IntN(1<<16) - 1<<15)
		raw = binary.BigEndian.AppendUint16(raw, uint16(s[i]))
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	os.WriteFile(p("short.zraw"), z.Bytes(), 0o644)
	hdr = fmt.Sprintf("NDims = 3\nDimSize = %d %d %d\nElementSize = 0.5 0.6 2\nElementType = MET_SHORT\nBinaryDataByteOrderMSB = True\n"+
		"CompressedData = True\nCompressedDataSize = %d\nElementDataFile = short.zraw\n", cols, rows, n, z.Len())
	os.WriteFile(p("short.mhd"), []byte(hdr), 0o644)
	im = read(t, p("short.mhd"), n, rows, cols)
	same(t, "MET_SHORT, big-endian, compressed, .raw", im.Pix, s)
	if im.Pixel != [2]float64{0.5, 0.6} {
		t.Errorf("mhd: spacing %v, want [0.5 0.6] from ElementSize", im.Pixel)
	}
}

// tiffSpec is a TIFF built by hand: pages of rows×cols samples of a
// format (1 unsigned, 2 signed, 3 float) and size, in strips of
// rowsPerStrip rows laid out last strip first, and extra entries.
type tiffSpec struct {
	order        byteOrder
	big          bool
	rows, cols   int
	bits, format int
	rowsPerStrip int
	pages        [][]float64
	res          [2][2]uint32 // XResolution, YResolution; none when zero
	unit         int          // ResolutionUnit; none when 0
	desc         string
	extra        []tiffEntry // added to (or replacing) every page's
	loop         bool        // the last page's next directory is the first
}

type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

type tiffEntry struct {
	tag, typ uint16
	vals     []uint64
}

func (s tiffSpec) sample(b []byte, x float64) []byte {
	o := s.order
	switch {
	case s.format == 3 && s.bits == 32:
		return o.AppendUint32(b, math.Float32bits(float32(x)))
	case s.format == 3 && s.bits == 64:
		return o.AppendUint64(b, math.Float64bits(x))
	case s.bits == 8:
		return append(b, byte(int64(x)))
	case s.bits == 16:
		return o.AppendUint16(b, uint16(int64(x)))
	case s.bits == 32:
		return o.AppendUint32(b, uint32(int64(x)))
	}
	panic("tiffSpec: samples of " + fmt.Sprint(s.bits))
}

// build lays out the header, every page's strips, then the directories
// with their values after each.
func (s tiffSpec) build() []byte {
	o := s.order
	var b []byte
	if o == binary.BigEndian {
		b = []byte("MM")
	} else {
		b = []byte("II")
	}
	word := 4
	if s.big {
		b = o.AppendUint16(b, 43)
		b = o.AppendUint16(b, 8)
		b = o.AppendUint16(b, 0)
		b = o.AppendUint64(b, 0) // the first directory, set below
		word = 8
	} else {
		b = o.AppendUint16(b, 42)
		b = o.AppendUint32(b, 0)
	}
	putWord := func(at int, v uint64) {
		if s.big {
			o.PutUint64(b[at:], v)
		} else {
			o.PutUint32(b[at:], uint32(v))
		}
	}
	rps := s.rowsPerStrip
	if rps == 0 {
		rps = s.rows
	}
	nStrips := (s.rows + rps - 1) / rps
	offs := make([][]uint64, len(s.pages))
	counts := make([]uint64, nStrips)
	for pi, pix := range s.pages {
		offs[pi] = make([]uint64, nStrips)
		for k := nStrips - 1; k >= 0; k-- {
			offs[pi][k] = uint64(len(b))
			start := k * rps * s.cols
			end := min((k+1)*rps, s.rows) * s.cols
			for _, x := range pix[start:end] {
				b = s.sample(b, x)
			}
			counts[k] = uint64((end - start) * s.bits / 8)
		}
	}
	next := 4 // where the offset of the next directory goes
	if s.big {
		next = 8
	}
	first := 0
	for pi := range s.pages {
		es := []tiffEntry{
			{tImageWidth, dtLong, []uint64{uint64(s.cols)}},
			{tImageLength, dtShort, []uint64{uint64(s.rows)}},
			{tBitsPerSample, dtShort, []uint64{uint64(s.bits)}},
			{tCompression, dtShort, []uint64{1}},
			{tPhotometric, dtShort, []uint64{1}},
			{tStripOffsets, dtLong, offs[pi]},
			{tSamplesPerPixel, dtShort, []uint64{1}},
			{tRowsPerStrip, dtShort, []uint64{uint64(rps)}},
			{tStripByteCounts, dtLong, counts},
			{tSampleFormat, dtShort, []uint64{uint64(s.format)}},
		}
		if pi == 0 && s.desc != "" {
			es = append(es, tiffEntry{tDescription, dtASCII, nil})
		}
		if s.res[0][1] != 0 {
			es = append(es, tiffEntry{tXResolution, dtRational, []uint64{uint64(s.res[0][0]), uint64(s.res[0][1])}},
				tiffEntry{tYResolution, dtRational, []uint64{uint64(s.res[1][0]), uint64(s.res[1][1])}})
		}
		if s.unit != 0 {
			es = append(es, tiffEntry{tResolutionUnit, dtShort, []uint64{uint64(s.unit)}})
		}
	extra:
		for _, e := range s.extra {
			for i := range es {
				if es[i].tag == e.tag {
					es[i] = e
					continue extra
				}
			}
			es = append(es, e)
		}
		if len(b)%2 == 1 {
			b = append(b, 0)
		}
		putWord(next, uint64(len(b)))
		if pi == 0 {
			first = len(b)
		}
		cnt, esz := 2, 12
		if s.big {
			cnt, esz = 8, 20
		}
		ifd := len(b)
		valAt := ifd + cnt + len(es)*esz + word
		var vals []byte
		if s.big {
			b = o.AppendUint64(b, uint64(len(es)))
		} else {
			b = o.AppendUint16(b, uint16(len(es)))
		}
		for _, e := range es {
			var v []byte
			count := uint64(len(e.vals))
			switch e.typ {
			case dtASCII:
				v = append([]byte(s.desc), 0)
				count = uint64(len(v))
			case dtShort:
				for _, x := range e.vals {
					v = o.AppendUint16(v, uint16(x))
				}
			case dtLong, dtRational:
				for _, x := range e.vals {
					v = o.AppendUint32(v, uint32(x))
				}
				if e.typ == dtRational {
					count /= 2
				}
			case dtLong8:
				for _, x := range e.vals {
					v = o.AppendUint64(v, x)
				}
			}
			b = o.AppendUint16(b, e.tag)
			b = o.AppendUint16(b, e.typ)
			if s.big {
				b = o.AppendUint64(b, count)
			} else {
				b = o.AppendUint32(b, uint32(count))
			}
			if len(v) <= word {
				b = append(b, v...)
				b = append(b, make([]byte, word-len(v))...)
				continue
			}
			if len(vals)%2 == 1 {
				vals = append(vals, 0)
			}
			if s.big {
				b = o.AppendUint64(b, uint64(valAt+len(vals)))
			} else {
				b = o.AppendUint32(b, uint32(valAt+len(vals)))
			}
			vals = append(vals, v...)
		}
		next = len(b)
		b = append(b, make([]byte, word)...)
		b = append(b, vals...)
	}
	if s.loop {
		putWord(next, uint64(first))
	}
	return b
}

// randomPages is n pages of random samples a format and size hold.
func randomPages(rng *rand.Rand, n, size, bits, format int) [][]float64 {
	ps := make([][]float64, n)
	for i := range ps {
		ps[i] = make([]float64, size)
		for k := range ps[i] {
			switch format {
			case 3:
				x := rng.NormFloat64() * 100
				if bits == 32 {
					x = float64(float32(x))
				}
				ps[i][k] = x
			case 1:
				ps[i][k] = float64(rng.Uint64N(1 << bits))
			case 2:
				ps[i][k] = float64(rng.Int64N(1<<bits) - 1<<(bits-1))
			}
		}
	}
	return ps
}

func flat(ps [][]float64) []float64 {
	var v []float64
	for _, p := range ps {
		v = append(v, p...)
	}
	return v
}

// TIFFs built by hand, the way other tools write them: big-endian,
// several strips per page, 8-, 16- and 32-bit integers, 64-bit floats,
// BigTIFF, resolution per inch, cm, or ImageJ's unit.
func TestReadTIFFByHand(t *testing.T) {
	rng := newRNG(t)
	dir := t.TempDir()
	const rows, cols = 11, 7
	for _, c := range []struct {
		name  string
		spec  tiffSpec
		pixel [2]float64
	}{
		{"big-endian float32 in strips", tiffSpec{order: binary.BigEndian, bits: 32, format: 3, rowsPerStrip: 4,
			res: [2][2]uint32{{10, 3}, {4, 1}}, unit: 3}, [2]float64{3, 2.5}},
		{"uint16", tiffSpec{order: binary.LittleEndian, bits: 16, format: 1, rowsPerStrip: 1,
			res: [2][2]uint32{{254, 1}, {127, 1}}}, [2]float64{0.1, 0.2}}, // per inch, the default unit
		{"big-endian uint16", tiffSpec{order: binary.BigEndian, bits: 16, format: 1, rowsPerStrip: 3}, [2]float64{}},
		{"uint8", tiffSpec{order: binary.LittleEndian, bits: 8, format: 1, rowsPerStrip: 5, res: [2][2]uint32{{1, 1}, {1, 1}}, unit: 1}, [2]float64{}},
		{"int16", tiffSpec{order: binary.BigEndian, bits: 16, format: 2}, [2]float64{}},
		{"uint32", tiffSpec{order: binary.LittleEndian, bits: 32, format: 1, rowsPerStrip: 2}, [2]float64{}},
		{"float64 BigTIFF big-endian", tiffSpec{order: binary.BigEndian, big: true, bits: 64, format: 3, rowsPerStrip: 6}, [2]float64{}},
		{"ImageJ in microns", tiffSpec{order: binary.LittleEndian, bits: 32, format: 3, desc: "ImageJ=1.54f\nimages=4\nunit=micron\nloop=false\n",
			res: [2][2]uint32{{1, 50}, {1, 40}}, unit: 1}, [2]float64{0.05, 0.04}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.spec
			s.rows, s.cols = rows, cols
			s.pages = randomPages(rng, 4, rows*cols, s.bits, s.format)
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".tif")
			os.WriteFile(path, s.build(), 0o644)
			im := read(t, path, 4, rows, cols)
			same(t, c.name, im.Pix, flat(s.pages))
			if !closeTo(im.Pixel, c.pixel) {
				t.Errorf("spacing %v, want %v", im.Pixel, c.pixel)
			}
		})
	}
}

// checkError checks that err is one lowercase line naming path and
// saying want.
func checkError(t *testing.T, path string, err error, want string) {
	t.Helper()
	switch msg := fmt.Sprint(err); {
	case err == nil:
		t.Errorf("%s: read, want an error saying %q", filepath.Base(path), want)
	case !strings.Contains(msg, want) || !strings.Contains(msg, path) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "stackfile: "):
		t.Errorf("%s: error %q, want one line from stackfile naming the file and saying %q", filepath.Base(path), msg, want)
	}
}

// What the readers do not read, and files that lie, are errors that say
// so, before anything is allocated for what a header claims.
func TestReadRefuses(t *testing.T) {
	rng := newRNG(t)
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	tif := func(f func(*tiffSpec)) []byte {
		s := tiffSpec{order: binary.LittleEndian, rows: 5, cols: 3, bits: 32, format: 3}
		s.pages = randomPages(rng, 2, 15, 32, 3)
		f(&s)
		return s.build()
	}
	ext := func(e ...tiffEntry) func(*tiffSpec) { return func(s *tiffSpec) { s.extra = e } }
	one := func(tag uint16, v uint64) tiffEntry { return tiffEntry{tag, dtShort, []uint64{v}} }
	good := tif(func(*tiffSpec) {})
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"lzw.tif", tif(ext(one(tCompression, 5))), "page 1 is compressed (LZW): only uncompressed TIFF is supported"},
		{"deflate.tif", tif(ext(one(tCompression, 8))), "compressed (Deflate)"},
		{"tiled.tif", tif(ext(tiffEntry{tTileWidth, dtShort, []uint64{16}}, tiffEntry{tTileOffsets, dtLong, []uint64{8}})), "page 1 is tiled"},
		{"rgb.tif", tif(ext(one(tSamplesPerPixel, 3))), "3 samples per pixel"},
		{"palette.tif", tif(ext(one(tPhotometric, 3))), "PhotometricInterpretation = 3"},
		{"half.tif", tif(ext(one(tBitsPerSample, 16))), "16-bit float samples"},
		{"bits.tif", tif(ext(one(tBitsPerSample, 1), one(tSampleFormat, 1))), "1-bit unsigned integer samples"},
		{"complex.tif", tif(ext(one(tSampleFormat, 6))), "SampleFormat = 6"},
		{"sizes.tif", nil, ""}, // built below
		{"loop.tif", tif(func(s *tiffSpec) { s.loop = true }), "the chain of pages loops"},
		{"huge.tif", tif(ext(tiffEntry{tImageWidth, dtLong, []uint64{1e6}}, tiffEntry{tImageLength, dtLong, []uint64{1e6}})), "page 1 is 1000000x1000000 of 32-bit samples: more than the file's"},
		{"strips.tif", tif(ext(tiffEntry{tStripOffsets, dtLong, []uint64{8, 1 << 30}}, tiffEntry{tStripByteCounts, dtLong, []uint64{36, 24}}, one(tRowsPerStrip, 3))), "page 1's strip 1 at byte 1073741824"},
		{"count.tif", tif(ext(tiffEntry{tStripByteCounts, dtLong, []uint64{59}})), "strip 0 holds 59 bytes, want 60"},
		{"values.tif", nil, ""}, // built below
		{"imagej.tif", tif(func(s *tiffSpec) { s.pages = s.pages[:1]; s.desc = "ImageJ=1.54f\nimages=2\n" }), "its ImageJ description says 2 images, the file has directories for 1"},
		{"notiff.tif", []byte("P5 3 5 255\n"), "not a TIFF file"},
		{"empty.tif", nil, "the TIFF header at byte 0 (8 bytes) lies past the end of the file (0 bytes)"},
		{"cut.tif", good[:len(good)-7], "lies past the end of the file"},
		{"onedim.npy", append(npy.EncodeHeader(npy.Float32, []int{6}), make([]byte, 24)...), "shape (6,): want (images, rows, cols)"},
		{"empty.npy", npy.EncodeHeader(npy.Float32, []int{0, 3, 4}), "0 images of 3x4"},
		{"lies.npy", append(npy.EncodeHeader(npy.Float64, []int{1000, 1000, 1000}), make([]byte, 24)...), "truncated"},
		{"cut.npy", append(npy.EncodeHeader(npy.Float32, []int{2, 3, 4}), make([]byte, 95)...), "truncated"},
		{"ndims.mha", []byte("NDims = 2\nDimSize = 3 4 5\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n"), "DimSize"},
		{"ndims4.mha", []byte("NDims = 4\nDimSize = 3 4 5 6\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n"), "NDims = 4"},
		{"huge.mha", []byte("NDims = 3\nDimSize = 1000000 1000000 1\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n"), "too large"},
		{"lies.mha", []byte("NDims = 3\nDimSize = 1000 1000 100\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n\x00\x00\x00\x00"), "truncated"},
		{"spacing.mha", append([]byte("NDims = 2\nDimSize = 1 1\nElementSpacing = 0 1\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n"), 7), "ElementSpacing [0 1]"},
		{"zjunk.mha", []byte("NDims = 2\nDimSize = 2 2\nElementType = MET_UCHAR\nCompressedData = True\nElementDataFile = LOCAL\nnot zlib"), "compressed"},
		{"images.png", []byte("x"), `unknown image format ".png"`},
	} {
		switch c.name {
		case "sizes.tif":
			s := tiffSpec{order: binary.LittleEndian, rows: 5, cols: 3, bits: 32, format: 3, pages: randomPages(rng, 1, 15, 32, 3)}
			o := s
			o.rows, o.cols, o.pages = 3, 5, randomPages(rng, 1, 15, 32, 3)
			// Page 2 of another size: its directory follows page 1's.
			b := s.build()
			c.b, c.want = joinTIFF(b, o.build()), "page 2 is 3x5, page 1 5x3: every page must be the same size"
		case "values.tif":
			s := tiffSpec{order: binary.LittleEndian, rows: 5, cols: 3, bits: 32, format: 3, pages: randomPages(rng, 1, 15, 32, 3),
				extra: []tiffEntry{{tStripOffsets, dtLong, []uint64{1 << 31, 0}}}}
			b := s.build()
			c.b, c.want = b, "page 1's StripOffsets"
			// The count of page 1's StripOffsets, made huge.
			i := bytes.Index(b, []byte{tStripOffsets & 0xff, tStripOffsets >> 8, dtLong, 0})
			binary.LittleEndian.PutUint32(b[i+4:], 1<<30)
			c.want = "page 1's StripOffsets holds 1073741824 values, more than the file's"
		}
		os.WriteFile(p(c.name), c.b, 0o644)
		_, err := Read(p(c.name))
		checkError(t, p(c.name), err, c.want)
	}
	runtime.ReadMemStats(&m)
	if a := m.TotalAlloc - before; a > 64<<20 {
		t.Errorf("refusing the files allocated %d bytes", a)
	}
}

// joinTIFF chains the pages of b2, a little-endian classic TIFF, after
// those of b: b2 is appended, its offsets moved by len(b).
func joinTIFF(b, b2 []byte) []byte {
	o := binary.LittleEndian
	shift := uint32(len(b))
	out := append(bytes.Clone(b), b2...)
	// The last directory of b ends in a 0 next offset: find it by walking.
	off := o.Uint32(b[4:])
	for {
		n := uint32(o.Uint16(b[off:]))
		at := off + 2 + 12*n
		next := o.Uint32(b[at:])
		if next == 0 {
			o.PutUint32(out[at:], o.Uint32(b2[4:])+shift)
			break
		}
		off = next
	}
	// b2's directories: every offset in them moves.
	off = o.Uint32(b2[4:])
	for off != 0 {
		d := out[shift+off:]
		n := int(o.Uint16(d))
		for i := range n {
			e := d[2+12*i:]
			tag, typ, count := o.Uint16(e), o.Uint16(e[2:]), o.Uint32(e[4:])
			size := uint32(typeSize(typ)) * count
			if size > 4 {
				vo := o.Uint32(e[8:])
				o.PutUint32(e[8:], vo+shift)
				if tag == tStripOffsets {
					for k := range count {
						v := out[shift+vo+4*k:]
						o.PutUint32(v, o.Uint32(v)+shift)
					}
				}
			} else if tag == tStripOffsets {
				o.PutUint32(e[8:], o.Uint32(e[8:])+shift)
			}
		}
		at := 2 + 12*n
		next := o.Uint32(d[at:])
		if next != 0 {
			o.PutUint32(d[at:], next+shift)
		}
		off = next
	}
	return out
}

// fuzzExts are the formats FuzzRead reads its input as, by its kind.
var fuzzExts = []string{".npy", ".mha", ".tif"}

// fileBytes is what make writes to a file, as bytes.
func fileBytes(t testing.TB, make func(path string)) []byte {
	path := filepath.Join(t.TempDir(), "f")
	make(path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Whatever a file holds, Read does not panic, says what is wrong in one
// line, and allocates in proportion to the file's bytes (after
// decompression): a constant for its buffers, 16 bytes per input byte,
// and the pixels it returns.
func FuzzRead(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := Stack{N: 3, Rows: 5, Cols: 4, Pixel: [2]float64{0.5, 0.25}}
	v := randomPix(rng, s.N*s.Rows*s.Cols)
	for _, c := range []struct {
		kind uint8
		make func(string)
	}{
		{0, func(p string) { writeNPY(f, p, v, npy.Float32, s.N, s.Rows, s.Cols) }},
		{0, func(p string) { writeNPY(f, p, v, npy.Float64, s.Rows, s.Cols*s.N) }},
		{1, func(p string) { writeStack(f, p, v, func(w *os.File) (*Writer, error) { return NewMHA(w, s) }) }},
		{2, func(p string) {
			writeStack(f, p, v, func(w *os.File) (*Writer, error) { return NewTIFF(w, s, TIFFOptions{}) })
		}},
		{2, func(p string) {
			writeStack(f, p, v, func(w *os.File) (*Writer, error) { return NewTIFF(w, s, TIFFOptions{BigTIFF: true}) })
		}},
		{2, func(p string) {
			ts := tiffSpec{order: binary.BigEndian, rows: 5, cols: 3, bits: 16, format: 1, rowsPerStrip: 2, pages: randomPages(rng, 2, 15, 16, 1)}
			os.WriteFile(p, ts.build(), 0o644)
		}},
	} {
		f.Add(c.kind, fileBytes(f, c.make))
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(make([]byte, 24))
	zw.Close()
	f.Add(uint8(1), append([]byte("NDims = 2\nDimSize = 4 3\nElementSpacing = 0.5 0.25\nElementType = MET_SHORT\nCompressedData = True\nElementDataFile = LOCAL\n"), z.Bytes()...))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		path := filepath.Join(dir, "f"+fuzzExts[int(kind)%len(fuzzExts)])
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		im, err := Read(path)
		runtime.ReadMemStats(&m1)
		limit := 16*uint64(len(b)) + 8<<20 + 8*uint64(len(im.Pix))
		if a := m1.TotalAlloc - m0.TotalAlloc; a > limit {
			t.Fatalf("allocated %d bytes for a %d-byte file (limit %d)", a, len(b), limit)
		}
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "stackfile: ") {
				t.Fatalf("error %q: want one line from stackfile", msg)
			}
			return
		}
		if im.N < 1 || im.Rows < 1 || im.Cols < 1 || len(im.Pix) != im.N*im.Rows*im.Cols {
			t.Fatalf("%d pixels for %d images of %dx%d", len(im.Pix), im.N, im.Rows, im.Cols)
		}
	})
}

// pyWrite writes, into argv[1] with seed argv[2], files as NumPy,
// tifffile and a MetaImage writer of its own write them, each with the
// float64 values Read must give (raw little-endian, C order), and a
// manifest of their shapes and spacings.
const pyWrite = `
import json, sys, zlib, numpy as np, tifffile
d, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
out = []
def add(name, a, pixel=(0, 0)):
    a = np.asarray(a)
    shape = a.shape if a.ndim == 3 else (1,) + a.shape
    np.ascontiguousarray(a, dtype="<f8").tofile("%s/%s.ref" % (d, name))
    out.append({"file": name, "shape": list(shape), "pixel": list(pixel)})
def floats(shape, dtype="f4"):
    a = (rng.standard_normal(shape) * 1000).astype(dtype)
    f = a.reshape(-1)
    f[rng.integers(f.size, size=4)] = [np.nan, np.inf, -np.inf, -0.0]
    return a
def ints(shape, dtype):
    i = np.iinfo(dtype)
    return rng.integers(i.min, i.max, size=shape, endpoint=True).astype(dtype)
a = floats((3, 17, 23))
tifffile.imwrite(d + "/imagej.tif", a, imagej=True, resolution=(1 / 0.388, 1 / 1.5), metadata={"unit": "mm"})
add("imagej.tif", a, (0.388, 1.5))
a = ints((3, 17, 23), "u2")
tifffile.imwrite(d + "/imagej16.tif", a, imagej=True)
add("imagej16.tif", a)
a = floats((3, 17, 23))
tifffile.imwrite(d + "/plain.tif", a, photometric="minisblack", rowsperstrip=5, resolution=(10 / 0.5, 10 / 0.25), resolutionunit="CENTIMETER")
add("plain.tif", a, (0.5, 0.25))
a = floats((3, 17, 23))
tifffile.imwrite(d + "/be.tif", a, photometric="minisblack", byteorder=">")
add("be.tif", a)
a = ints((4, 9, 5), "u2")
tifffile.imwrite(d + "/u16be.tif", a, photometric="minisblack", byteorder=">", rowsperstrip=2)
add("u16be.tif", a)
a = ints((2, 7, 11), "u1")
tifffile.imwrite(d + "/u8.tif", a, photometric="minisblack", resolution=(254, 127), resolutionunit="INCH")
add("u8.tif", a, (0.1, 0.2))
a = floats((2, 5, 7), "f8")
tifffile.imwrite(d + "/f64.tif", a, photometric="minisblack", bigtiff=True)
add("f64.tif", a)
a = floats((17, 23))
tifffile.imwrite(d + "/one.tif", a, photometric="minisblack")
add("one.tif", a)
a = floats((3, 17, 23), "f8")
np.save(d + "/f64.npy", a)
add("f64.npy", a)
a = floats((3, 17, 23), ">f4")
np.save(d + "/be.npy", a)
add("be.npy", a)
a = np.asfortranarray(ints((17, 23), ">i2"))
np.save(d + "/i16.npy", a)
add("i16.npy", a)
a = ints((2, 3, 5), "u1")
np.save(d + "/u8.npy", a)
add("u8.npy", a)
def meta(name, a, etype, spacing, data=None, compress=True):
    raw = a.tobytes()
    z = zlib.compress(raw) if compress else raw
    dims = " ".join(str(x) for x in a.shape[::-1])
    h = "ObjectType = Image\nNDims = %d\nBinaryData = True\nBinaryDataByteOrderMSB = %s\n" % (a.ndim, a.dtype.byteorder == ">")
    h += "CompressedData = %s\n" % compress
    if compress:
        h += "CompressedDataSize = %d\n" % len(z)
    h += "TransformMatrix = %s\n" % " ".join("1" if i % (a.ndim + 1) == 0 else "0" for i in range(a.ndim * a.ndim))
    h += "Offset = %s\nElementSpacing = %s\nDimSize = %s\nElementType = %s\n" % (" ".join(["0"] * a.ndim), " ".join(map(str, spacing)), dims, etype)
    with open(d + "/" + name, "wb") as f:
        if data:
            f.write((h + "ElementDataFile = %s\n" % data).encode())
            open(d + "/" + data, "wb").write(z)
        else:
            f.write((h + "ElementDataFile = LOCAL\n").encode() + z)
    add(name, a, spacing[:2])
meta("z.mha", floats((3, 17, 23)), "MET_FLOAT", (0.3, 0.7, 1))
meta("z2.mhd", floats((17, 23), "<f8"), "MET_DOUBLE", (0.125, 2), data="z2.zraw")
meta("u16.mha", ints((3, 17, 23), ">u2"), "MET_USHORT", (1.5, 0.5, 3), compress=False)
meta("s16.mha", ints((2, 9, 4), "<i2"), "MET_SHORT", (1, 1, 1))
meta("u8.mha", ints((17, 23), "u1"), "MET_UCHAR", (0.2, 0.2))
json.dump(out, open(d + "/manifest.json", "w"))
`

// What NumPy, tifffile (ImageJ and plain, big-endian, in strips) and a
// MetaImage writer in Python (zlib-compressed, data files) write, Read
// reads bit for bit, with the spacing the files give.
func TestReadPython(t *testing.T) {
	py := testutil.Python(t, "numpy", "tifffile")
	dir := t.TempDir()
	seed := rand.Int64N(1 << 62)
	t.Logf("seed %d", seed)
	if out, err := exec.Command(py, "-c", pyWrite, dir, strconv.FormatInt(seed, 10)).CombinedOutput(); err != nil {
		t.Fatalf("writing the files in Python: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var files []struct {
		File  string
		Shape [3]int
		Pixel [2]float64
	}
	if err := json.Unmarshal(b, &files); err != nil {
		t.Fatal(err)
	}
	if len(files) != 17 {
		t.Fatalf("%d files in the manifest, want 17", len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(dir, f.File+".ref"))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(raw)/8)
		for i := range want {
			want[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
		}
		im := read(t, filepath.Join(dir, f.File), f.Shape[0], f.Shape[1], f.Shape[2])
		same(t, f.File, im.Pix, want)
		if !closeTo(im.Pixel, f.Pixel) {
			t.Errorf("%s: spacing %v, want %v", f.File, im.Pixel, f.Pixel)
		}
	}
}
