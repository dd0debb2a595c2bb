package stackfile

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/testutil"
)

// stack is n images of rows×cols whose every pixel differs, and ±0, NaN
// and ±Inf among them.
func stack(n, rows, cols int) []float32 {
	v := make([]float32, n*rows*cols)
	for i := range v {
		v[i] = float32(i)*0.25 - 3
	}
	v[1] = float32(math.Copysign(0, -1))
	v[2] = float32(math.NaN())
	v[3] = float32(math.Inf(1))
	v[4] = float32(math.Inf(-1))
	return v
}

// write writes the stack to dir/name by make, in batches of two images.
func write(t *testing.T, path string, s Stack, make func(*os.File) (*Writer, error)) []float32 {
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
	v := stack(s.N, s.Rows, s.Cols)
	per := 2 * s.Rows * s.Cols
	for i := 0; i < len(v); i += per {
		if err := w.Write32(v[i:min(i+per, len(v))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return v
}

// tiffCheck parses a TIFF with struct alone (no TIFF library): the header,
// every directory in the chain and its fields, and compares each page's
// strip with the stack NumPy computes as the test does.
const tiffCheck = `
import struct, sys, numpy as np
path, n, rows, cols, big, xres, yres = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6], sys.argv[7]
b = open(path, "rb").read()
assert b[:2] == b"II", b[:2]
ver, = struct.unpack_from("<H", b, 2)
assert ver == (43 if big else 42), ver
if big:
    assert struct.unpack_from("<HH", b, 4) == (8, 0)
    off, = struct.unpack_from("<Q", b, 8)
else:
    off, = struct.unpack_from("<I", b, 4)
sizes = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 16: 8}
fmts = {1: "B", 2: "B", 3: "H", 4: "I", 5: "I", 16: "Q"}
want = (np.arange(n * rows * cols, dtype=np.float32) * np.float32(0.25) - np.float32(3)).reshape(n, rows, cols)
flat = want.reshape(-1)
flat[1], flat[2], flat[3], flat[4] = -0.0, np.nan, np.inf, -np.inf
pages, ends = 0, []
while off:
    assert off % 2 == 0, "directory at odd offset %d" % off
    if big:
        cnt, = struct.unpack_from("<Q", b, off); p, es, ws = off + 8, 20, 8
    else:
        cnt, = struct.unpack_from("<H", b, off); p, es, ws = off + 2, 12, 4
    tags, last = {}, 0
    for k in range(cnt):
        tag, typ = struct.unpack_from("<HH", b, p + k * es)
        count, = struct.unpack_from("<Q" if big else "<I", b, p + k * es + 4)
        assert tag > last, "tags not ascending"
        last = tag
        size = sizes[typ] * count
        vo = p + k * es + 4 + ws
        if size > ws:
            vo, = struct.unpack_from("<Q" if big else "<I", b, vo)
            assert vo % 2 == 0
        vals = struct.unpack_from("<%d%s" % (count * (2 if typ == 5 else 1), fmts[typ]), b, vo)
        tags[tag] = vals if typ != 2 else bytes(vals).rstrip(b"\0").decode()
    off, = struct.unpack_from("<Q" if big else "<I", b, p + cnt * es)
    assert tags[256] == (cols,) and tags[257] == (rows,), tags
    assert tags[258] == (32,) and tags[339] == (3,), "not 32-bit float"
    assert tags[259] == (1,) and tags[262] == (1,) and tags[277] == (1,), tags
    assert tags[278] == (rows,) and tags[279] == (rows * cols * 4,), tags
    if xres == "-":
        assert 282 not in tags and 283 not in tags and 296 not in tags
    else:
        assert tags[296] == (3,), tags[296]
        for t, r in ((282, xres), (283, yres)):
            got = tags[t][0] / tags[t][1]
            assert abs(got - float(r)) <= 1e-9 * float(r), (t, tags[t], r)
    if pages == 0:
        assert tags[270] == "ImageJ=1.11a\nimages=%d\nloop=false\n" % n, repr(tags[270])
    else:
        assert 270 not in tags
    o = tags[273][0]
    img = np.frombuffer(b, dtype="<f4", count=rows * cols, offset=o).reshape(rows, cols)
    assert b[o:o + rows * cols * 4] == want[pages].astype("<f4").tobytes(), (pages, img, want[pages])
    ends.append((o, o + rows * cols * 4))
    pages += 1
assert pages == n, (pages, n)
ends.sort()
assert all(a[1] <= b_[0] for a, b_ in zip(ends, ends[1:])), "strips overlap"
`

func TestTIFF(t *testing.T) {
	py := testutil.Python(t, "numpy")
	dir := t.TempDir()
	for _, c := range []struct {
		name       string
		s          Stack
		big        bool
		xres, yres string // pixels per cm; "-": none
	}{
		{"one page", Stack{N: 1, Rows: 3, Cols: 5, Pixel: [2]float64{2, 2}}, false, "5", "5"},
		{"pages", Stack{N: 7, Rows: 4, Cols: 3, Pixel: [2]float64{0.388, 1.5}}, false, "25.773195876288657", "6.666666666666667"},
		{"odd sizes", Stack{N: 5, Rows: 1, Cols: 1, Pixel: [2]float64{0.0005, 1000}}, false, "20000", "0.01"},
		{"no spacing", Stack{N: 4, Rows: 2, Cols: 6}, false, "-", "-"},
		{"bigtiff", Stack{N: 5, Rows: 3, Cols: 4, Pixel: [2]float64{2, 3}}, true, "5", "3.3333333333333335"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".tiff")
			write(t, path, c.s, func(f *os.File) (*Writer, error) { return NewTIFF(f, c.s, TIFFOptions{BigTIFF: c.big}) })
			big := "0"
			if c.big {
				big = "1"
			}
			out, err := exec.Command(py, "-c", tiffCheck, path, strconv.Itoa(c.s.N), strconv.Itoa(c.s.Rows), strconv.Itoa(c.s.Cols), big, c.xres, c.yres).CombinedOutput()
			if err != nil {
				t.Fatalf("the Python check: %v\n%s", err, out)
			}
		})
	}
}

// mhaCheck reads a MetaImage as its header says, with NumPy: the header's
// keys and the data after it.
const mhaCheck = `
import sys, numpy as np
path, n, rows, cols, du, dv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
b = open(path, "rb").read()
h, i = {}, 0
while True:
    j = b.index(b"\n", i)
    k, v = b[i:j].decode().split(" = ")
    h[k] = v
    i = j + 1
    if k == "ElementDataFile":
        break
assert h["NDims"] == "3" and h["DimSize"] == "%d %d %d" % (cols, rows, n), h
assert h["ElementType"] == "MET_FLOAT" and h["BinaryDataByteOrderMSB"] == "False" and h["ElementDataFile"] == "LOCAL", h
assert [float(x) for x in h["ElementSpacing"].split()] == [float(du), float(dv), 1.0], h["ElementSpacing"]
assert h["Offset"] == "0 0 0" and h["TransformMatrix"] == "1 0 0 0 1 0 0 0 1", h
a = np.frombuffer(b, dtype="<f4", offset=i).reshape(n, rows, cols)   # DimSize is x fastest: (z, y, x) in C order
want = (np.arange(n * rows * cols, dtype=np.float32) * np.float32(0.25) - np.float32(3)).reshape(n, rows, cols)
flat = want.reshape(-1)
flat[1], flat[2], flat[3], flat[4] = -0.0, np.nan, np.inf, -np.inf
assert a.tobytes() == want.astype("<f4").tobytes(), (a, want)
print(i)
`

func TestMHA(t *testing.T) {
	py := testutil.Python(t, "numpy")
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		s      Stack
		du, dv string
	}{
		{"spacing", Stack{N: 6, Rows: 4, Cols: 3, Pixel: [2]float64{0.388, 1.5}}, "0.388", "1.5"},
		{"no spacing", Stack{N: 2, Rows: 3, Cols: 5}, "1", "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".mha")
			var w *Writer
			write(t, path, c.s, func(f *os.File) (*Writer, error) {
				var err error
				w, err = NewMHA(f, c.s)
				return w, err
			})
			out, err := exec.Command(py, "-c", mhaCheck, path, strconv.Itoa(c.s.N), strconv.Itoa(c.s.Rows), strconv.Itoa(c.s.Cols), c.du, c.dv).CombinedOutput()
			if err != nil {
				t.Fatalf("the Python check: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != strconv.Itoa(int(w.DataOffset())) {
				t.Errorf("the data starts at %s, DataOffset says %d", got, w.DataOffset())
			}
		})
	}
}

// A writer given too few or too many pixels says so.
func TestWriterCounts(t *testing.T) {
	s := Stack{N: 2, Rows: 2, Cols: 2}
	for _, mk := range []func(*bytes.Buffer) (*Writer, error){
		func(b *bytes.Buffer) (*Writer, error) { return NewMHA(b, s) },
		func(b *bytes.Buffer) (*Writer, error) { return NewTIFF(b, s, TIFFOptions{}) },
	} {
		var b bytes.Buffer
		w, err := mk(&b)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write32(make([]float32, 7)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "7 of 8 pixels") {
			t.Errorf("short stack: %v", err)
		}
		if err := w.Write32(make([]float32, 2)); err == nil {
			t.Error("a pixel too many was taken")
		}
	}
	if _, err := NewTIFF(&bytes.Buffer{}, Stack{N: 0, Rows: 2, Cols: 2}, TIFFOptions{}); err == nil {
		t.Error("an empty stack was taken")
	}
	if _, err := NewMHA(&bytes.Buffer{}, Stack{N: 1, Rows: 2, Cols: 2, Pixel: [2]float64{math.NaN(), 1}}); err == nil {
		t.Error("a NaN spacing was taken")
	}
}

// A stack past 4 GiB is written as BigTIFF without being asked.
func TestTIFFBigWhenLarge(t *testing.T) {
	var b bytes.Buffer
	if _, err := NewTIFF(&b, Stack{N: 1 << 10, Rows: 1 << 10, Cols: 1 << 10}, TIFFOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := b.Bytes()[:4]; !bytes.Equal(got, []byte{'I', 'I', 43, 0}) {
		t.Errorf("a 4 GiB stack starts %v, want BigTIFF", got)
	}
	b.Reset()
	if _, err := NewTIFF(&b, Stack{N: 1 << 9, Rows: 1 << 10, Cols: 1 << 10}, TIFFOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := b.Bytes()[:4]; !bytes.Equal(got, []byte{'I', 'I', 42, 0}) {
		t.Errorf("a 2 GiB stack starts %v, want classic TIFF", got)
	}
}
