package volume

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
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

// dcmWorld is the centre of voxel idx: Origin + Direction·(idx⊙Spacing).
func dcmWorld(v *Volume, idx [3]int) [3]float64 {
	var w [3]float64
	for r := range 3 {
		w[r] = v.Origin[r]
		for a := range 3 {
			w[r] += v.Direction[r][a] * float64(idx[a]) * v.Spacing[a]
		}
	}
	return w
}

// dcmDecimal formats x as a short exact decimal string (what DS holds).
func dcmDecimal(x float64) string {
	s := strconv.FormatFloat(x, 'f', 6, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// dcmPositions returns n ImagePositionPatient values ipp0 + k·step as decimal
// strings, in an order that is not the slices' order.
func dcmPositions(n int, ipp0, step [3]float64) [][3]string {
	out := make([][3]string, n)
	for k := range n {
		kk := (k*3 + 1) % n // a permutation when n is not a multiple of 3
		for r := range 3 {
			out[k][r] = dcmDecimal(ipp0[r] + float64(kk)*step[r])
		}
	}
	return out
}

// pySeries is one series for testdata/dicom_series.py.
type (
	pySeries = testutil.PyDICOMSeries
	pyExpect = testutil.PyDICOMExpect
)

// checkAgainstPydicom compares a loaded volume with what pydicom made of
// the same files: every voxel value, and the world position of the
// expected voxels to 1e-6 mm.
func checkAgainstPydicom(t *testing.T, v *Volume, e *pyExpect) {
	t.Helper()
	h, want, err := npy.ReadAll64(e.Npy)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(h.Shape) != fmt.Sprint([]int{int(v.N[0]), int(v.N[1]), int(v.N[2])}) {
		t.Fatalf("shape %v, pydicom %v", v.N, h.Shape)
	}
	bad := 0
	for i, w := range want {
		if v.V[i] != float32(w) {
			if bad++; bad <= 3 {
				t.Errorf("voxel %d: %v, pydicom %v", i, v.V[i], w)
			}
		}
	}
	b, err := os.ReadFile(e.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var pos struct{ World [][3]float64 }
	if err := json.Unmarshal(b, &pos); err != nil {
		t.Fatal(err)
	}
	for n, idx := range e.Voxels {
		got := dcmWorld(v, idx)
		for r := range 3 {
			if math.Abs(got[r]-pos.World[n][r]) > 1e-6 {
				t.Errorf("voxel %v at %v, pydicom %v", idx, got, pos.World[n])
				break
			}
		}
	}
	// The direction cosines are orthonormal.
	for a := range 3 {
		for b := range 3 {
			d := 0.0
			for r := range 3 {
				d += v.Direction[r][a] * v.Direction[r][b]
			}
			if want := float64(dcmB2i(a == b)); math.Abs(d-want) > 1e-12 {
				t.Errorf("Direction columns %d·%d = %v", a, b, d)
			}
		}
	}
}

func dcmB2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writePySeries has pydicom write the series (and their expectations).
func writePySeries(t *testing.T, spec []pySeries) {
	t.Helper()
	testutil.WritePyDICOM(t, spec)
}

// The oblique orientation: rows of an orthogonal matrix with exact decimal
// entries; the normal rowdir × coldir is (0.48, 0.64, 0.6).
var obliqueIOP = []string{"0.36", "0.48", "-0.8", "-0.8", "0.6", "0"}

func dcmCorners(nx, ny, nz int) [][3]int {
	var out [][3]int
	for _, i := range []int{0, nx - 1} {
		for _, j := range []int{0, ny - 1} {
			for _, k := range []int{0, nz - 1} {
				out = append(out, [3]int{i, j, k})
			}
		}
	}
	return append(out, [3]int{nx / 2, ny / 3, nz / 2})
}

// TestDICOMMatchesPydicom writes series with pydicom and reads them:
// shuffled file names and InstanceNumbers, explicit and implicit VR, an
// oblique orientation, a normal along −z, rescaling, two series in one
// directory, and the series refused (uneven spacing, gantry tilt, a
// compressed transfer syntax).
func TestDICOMMatchesPydicom(t *testing.T) {
	root := t.TempDir()
	d := func(n string) string { return filepath.Join(root, n) }
	exp := func(name string, nx, ny, nz int) *pyExpect {
		return &pyExpect{Npy: d(name + ".npy"), JSON: d(name + ".json"), Voxels: dcmCorners(nx, ny, nz)}
	}
	axialIOP := []string{"1", "0", "0", "0", "1", "0"}
	base := func(dir, uid string, seed int) pySeries {
		return pySeries{Dir: d(dir), UID: uid, Desc: "CT " + dir, Syntax: "explicit", Rows: 4, Cols: 6, PS: []string{"0.7", "0.9"},
			IOP: axialIOP, BitsStored: 16, Slope: "1", Intercept: "-1024", Seed: seed}
	}
	axial := base("axial", "1.2.826.0.1.3680043.8.498.10", 1)
	axial.IPPs = dcmPositions(5, [3]float64{-10.5, 20.25, -30}, [3]float64{0, 0, 2.5})
	axial.Sequence = true
	axial.Expect = exp("axial", 6, 4, 5)

	oblique := base("oblique", "1.2.826.0.1.3680043.8.498.11", 2)
	oblique.Syntax, oblique.Rows, oblique.Cols, oblique.PS, oblique.IOP = "implicit", 5, 3, []string{"1.5", "0.8"}, obliqueIOP
	oblique.IPPs = dcmPositions(7, [3]float64{100.25, -50.5, 12}, [3]float64{0.6, 0.8, 0.75}) // 1.25 mm along the normal
	oblique.Signed, oblique.BitsStored, oblique.Slope, oblique.Intercept = true, 12, "2.5", "-1000.5"
	oblique.Sequence = true
	oblique.Expect = exp("oblique", 3, 5, 7)

	// Column cosine (0, −1, 0): the normal is −z, so slices run from head to feet.
	negative := base("negative", "1.2.826.0.1.3680043.8.498.12", 3)
	negative.IOP = []string{"1", "0", "0", "0", "-1", "0"}
	negative.IPPs = dcmPositions(4, [3]float64{0, 0, 40}, [3]float64{0, 0, -3})
	negative.Signed, negative.Slope, negative.Intercept = true, "0.5", "0"
	negative.Expect = exp("negative", 6, 4, 4)

	first := base("two", "1.2.826.0.1.3680043.8.498.13", 4)
	first.Desc = "first series"
	first.IPPs = dcmPositions(4, [3]float64{0, 0, 0}, [3]float64{0, 0, 1})
	first.Expect = exp("two-first", 6, 4, 4)
	second := base("two", "1.2.826.0.1.3680043.8.498.14", 5)
	second.Desc, second.Syntax, second.Rows, second.Cols = "second series", "implicit", 3, 2
	second.IPPs = dcmPositions(5, [3]float64{1, 2, 3}, [3]float64{0, 0, 2})
	second.Expect = exp("two-second", 2, 3, 5)

	uneven := base("uneven", "1.2.826.0.1.3680043.8.498.15", 6)
	uneven.IPPs = [][3]string{{"0", "0", "0"}, {"0", "0", "1"}, {"0", "0", "3.5"}, {"0", "0", "2"}, {"0", "0", "4.5"}}
	tilt := base("tilt", "1.2.826.0.1.3680043.8.498.16", 7)
	tilt.IPPs = dcmPositions(5, [3]float64{0, 0, 0}, [3]float64{0, 0.5, 2})
	jpeg := base("jpeg2000", "1.2.826.0.1.3680043.8.498.17", 8)
	jpeg.Syntax = "1.2.840.10008.1.2.4.90"
	jpeg.IPPs = dcmPositions(2, [3]float64{0, 0, 0}, [3]float64{0, 0, 1})

	writePySeries(t, []pySeries{axial, oblique, negative, first, second, uneven, tilt, jpeg})

	for _, s := range []pySeries{axial, oblique, negative} {
		t.Run(filepath.Base(s.Dir), func(t *testing.T) {
			v, err := Load(s.Dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstPydicom(t, v, s.Expect)
		})
	}
	t.Run("normal along -z", func(t *testing.T) {
		v, err := Load(negative.Dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if v.Origin[2] != 40 || v.Spacing[2] != 3 || v.Direction[2][2] != -1 || v.Direction[1][1] != -1 {
			t.Errorf("origin %v spacing %v direction %v; want the z = 40 slice first, 3 mm apart, along −z", v.Origin, v.Spacing, v.Direction)
		}
	})
	t.Run("one file of the series", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(axial.Dir, "*.dcm"))
		if len(files) == 0 {
			t.Fatal("no .dcm files written")
		}
		v, err := Load(files[0], Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstPydicom(t, v, axial.Expect)
	})
	t.Run("two series", func(t *testing.T) {
		_, err := Load(first.Dir, Options{})
		msg := fmt.Sprint(err)
		for _, want := range []string{"2 DICOM series", "--series", first.UID, `"first series" (4 slices)`, second.UID, `"second series" (5 slices)`} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not mention %q", msg, want)
			}
		}
		for _, s := range []pySeries{first, second} {
			v, err := Load(s.Dir, Options{Series: s.UID})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstPydicom(t, v, s.Expect)
		}
		_, err = Load(first.Dir, Options{Series: "1.2.3"})
		if msg := fmt.Sprint(err); !strings.Contains(msg, "no series 1.2.3") || !strings.Contains(msg, second.UID) {
			t.Errorf("unknown --series: %v", err)
		}
	})
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{uneven.Dir, []string{"uneven", "gaps from 1 to 1.5 mm", "resample", "dcm2niix", "_Eq_1"}},
		{tilt.Dir, []string{"gantry tilt", "14", "resample", "dcm2niix", "_Tilt_1"}},
		{jpeg.Dir, []string{"1.2.840.10008.1.2.4.90", "JPEG 2000 Image Compression (Lossless Only)", "gdcmconv --raw", "dcm2niix"}},
	} {
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			_, err := Load(c.dir, Options{})
			msg := fmt.Sprint(err)
			if err == nil || strings.Contains(msg, "\n") {
				t.Fatalf("got %q, want a one-line error", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

// dcmGoSeries writes a series with testutil.DICOMFile: n slices 1.5 mm apart
// along z, value 100·col + 10·row + k stored.
func dcmGoSeries(t *testing.T, dir string, n int, edit func(k int, s *testutil.DICOMSlice)) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	for k := range n {
		s := testutil.DICOMSlice{Series: "1.2.3.4", Description: "go", Instance: k + 1, IPP: [3]float64{-5, 7, 1.5 * float64(k)},
			IOP: [6]float64{1, 0, 0, 0, 1, 0}, PixelSpacing: [2]float64{0.5, 0.25}, Rows: 3, Cols: 4, Slope: 1, Intercept: 0, Signed: true}
		s.Pixels = make([]int16, s.Rows*s.Cols)
		for r := range s.Rows {
			for c := range s.Cols {
				s.Pixels[r*s.Cols+c] = int16(100*c + 10*r + k)
			}
		}
		if edit != nil {
			edit(k, &s)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("s%03d", (k*7)%n)), testutil.DICOMFile(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDICOMSkipsSequences reads series written in explicit and implicit VR
// with nested undefined-length sequences (SQ and UN), a defined-length
// sequence holding its own ImagePositionPatient, and private elements.
func TestDICOMSkipsSequences(t *testing.T) {
	for _, syntax := range []string{syntaxExplicitLE, syntaxImplicitLE} {
		t.Run(syntaxName(syntax), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			dcmGoSeries(t, dir, 5, func(k int, s *testutil.DICOMSlice) {
				s.Syntax, s.Sequences, s.Slope, s.Intercept = syntax, true, 2, -3
			})
			v, err := Load(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if v.N != [3]int64{4, 3, 5} || v.Spacing != [3]float64{0.25, 0.5, 1.5} || v.Origin != [3]float64{-5, 7, 0} {
				t.Fatalf("shape %v spacing %v origin %v", v.N, v.Spacing, v.Origin)
			}
			if v.Direction != [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}} {
				t.Errorf("direction %v", v.Direction)
			}
			for i := range 4 {
				for j := range 3 {
					for k := range 5 {
						if got, want := v.V[(i*3+j)*5+k], float32(2*(100*i+10*j+k)-3); got != want {
							t.Fatalf("voxel (%d, %d, %d) = %v, want %v", i, j, k, got, want)
						}
					}
				}
			}
		})
	}
}

// TestDICOMBitsStored drops bits above BitsStored and sign-extends from it.
func TestDICOMBitsStored(t *testing.T) {
	s := &dicomSlice{bitsAllocated: 16, bitsStored: 12, pixelRep: 1, slope: 1}
	raw := binary.LittleEndian.AppendUint16(nil, 0xF800) // bit 11 set: −2048
	raw = binary.LittleEndian.AppendUint16(raw, 0x07FF)  // 2047
	raw = binary.LittleEndian.AppendUint16(raw, 0xA001)  // garbage above bit 11: 1
	out := make([]float32, 3)
	s.decode(raw, out)
	if out[0] != -2048 || out[1] != 2047 || out[2] != 1 {
		t.Errorf("signed 12 of 16 bits: %v", out)
	}
	s.pixelRep = 0
	s.decode(raw, out)
	if out[0] != 0x800 || out[1] != 0x7FF || out[2] != 1 {
		t.Errorf("unsigned 12 of 16 bits: %v", out)
	}
}

// dcmPatch replaces the one occurrence of old in b.
func dcmPatch(t *testing.T, b, old, new []byte) []byte {
	t.Helper()
	if bytes.Count(b, old) != 1 {
		t.Fatalf("%x occurs %d times", old, bytes.Count(b, old))
	}
	return bytes.Replace(b, old, new, 1)
}

// dcmUsElement is an explicit VR US element's bytes.
func dcmUsElement(g, e, x uint16) []byte {
	b := binary.LittleEndian.AppendUint16(nil, g)
	b = binary.LittleEndian.AppendUint16(b, e)
	b = append(b, 'U', 'S', 2, 0)
	return binary.LittleEndian.AppendUint16(b, x)
}

func TestDICOMRefuses(t *testing.T) {
	root := t.TempDir()
	one := func(name string, edit func(k int, s *testutil.DICOMSlice)) string {
		dir := filepath.Join(root, name)
		dcmGoSeries(t, dir, 3, edit)
		return dir
	}
	rewrite := func(dir string, f func([]byte) []byte) {
		p := filepath.Join(dir, "s000")
		b, _ := os.ReadFile(p)
		os.WriteFile(p, f(b), 0o644)
	}
	textOnly := filepath.Join(root, "text")
	os.MkdirAll(textOnly, 0o755)
	os.WriteFile(filepath.Join(textOnly, "a.txt"), []byte(strings.Repeat("hello ", 50)), 0o644)
	empty := filepath.Join(root, "empty")
	os.MkdirAll(empty, 0o755)

	truncated := one("truncated", nil)
	rewrite(truncated, func(b []byte) []byte { return b[:len(b)-7] })
	huge := one("huge", nil)
	rewrite(huge, func(b []byte) []byte {
		// PixelData OW claiming 4 GiB − 2.
		i := bytes.Index(b, []byte{0xE0, 0x7F, 0x10, 0x00, 'O', 'W', 0, 0})
		binary.LittleEndian.PutUint32(b[i+8:], 0xFFFFFFFE)
		return b
	})
	hugeString := one("hugestring", nil)
	rewrite(hugeString, func(b []byte) []byte {
		// SeriesDescription LO re-encoded as UT of 1 GiB.
		i := bytes.Index(b, []byte{0x08, 0x00, 0x3E, 0x10, 'L', 'O'})
		head := append([]byte{0x08, 0x00, 0x3E, 0x10, 'U', 'T', 0, 0}, binary.LittleEndian.AppendUint32(nil, 1<<30)...)
		return append(append(append([]byte{}, b[:i]...), head...), b[i+8:]...)
	})
	samples := one("samples", nil)
	rewrite(samples, func(b []byte) []byte { return dcmPatch(t, b, dcmUsElement(0x28, 2, 1), dcmUsElement(0x28, 2, 3)) })
	bits := one("bits", nil)
	rewrite(bits, func(b []byte) []byte {
		return dcmPatch(t, b, dcmUsElement(0x28, 0x100, 16), dcmUsElement(0x28, 0x100, 12))
	})
	rep := one("rep", nil)
	rewrite(rep, func(b []byte) []byte {
		return dcmPatch(t, b, dcmUsElement(0x28, 0x103, 1), dcmUsElement(0x28, 0x103, 2))
	})
	rows := one("rows", nil)
	rewrite(rows, func(b []byte) []byte {
		return dcmPatch(t, b, dcmUsElement(0x28, 0x10, 3), dcmUsElement(0x28, 0x10, 300))
	})
	noIPP := one("noipp", nil)
	rewrite(noIPP, func(b []byte) []byte {
		return dcmPatch(t, b, []byte{0x20, 0x00, 0x32, 0x00}, []byte{0x20, 0x00, 0x33, 0x00})
	})
	frames := one("frames", func(k int, s *testutil.DICOMSlice) { s.Frames = 3 })
	sizes := one("sizes", func(k int, s *testutil.DICOMSlice) {
		if k == 1 {
			s.Rows, s.Pixels = 2, s.Pixels[:8]
		}
	})
	orient := one("orient", func(k int, s *testutil.DICOMSlice) {
		if k == 1 {
			s.IOP = [6]float64{0, 1, 0, 1, 0, 0}
		}
	})
	skew := one("skew", func(k int, s *testutil.DICOMSlice) { s.IOP = [6]float64{1, 0, 0, 0.1, 1, 0} })
	same := one("same", func(k int, s *testutil.DICOMSlice) { s.IPP[2] = 0 })
	rle := one("rle", func(k int, s *testutil.DICOMSlice) { s.Syntax = "1.2.840.10008.1.2.5" })
	deflated := one("deflated", func(k int, s *testutil.DICOMSlice) { s.Syntax = syntaxDeflated })
	bigEndian := one("bigendian", func(k int, s *testutil.DICOMSlice) { s.Syntax = syntaxExplicitBE })
	unknown := one("unknown", func(k int, s *testutil.DICOMSlice) { s.Syntax = "1.2.3.4.5" })
	good := one("good", nil)
	npyFile := filepath.Join(root, "v.npy")
	os.WriteFile(npyFile, []byte("not really"), 0o644)

	cases := []struct {
		name, path, series string
		want               []string
	}{
		{"no DICOM", textOnly, "", []string{"holds no DICOM image files"}},
		{"empty directory", empty, "", []string{"holds no DICOM image files"}},
		{"truncated", truncated, "", []string{"s000", "truncated"}},
		{"huge pixel data", huge, "", []string{"s000", "truncated"}},
		{"huge string", hugeString, "", []string{"s000", "(0008,103E) holds 1073741824 bytes"}},
		{"samples per pixel", samples, "", []string{"SamplesPerPixel is 3"}},
		{"bits allocated", bits, "", []string{"BitsAllocated 12"}},
		{"pixel representation", rep, "", []string{"PixelRepresentation 2"}},
		{"rows beyond the pixel data", rows, "", []string{"pixel data holds 24 bytes; 300 rows × 4 columns × 16 bits need 2400"}},
		{"no position", noIPP, "", []string{"no ImagePositionPatient (0020,0032)"}},
		{"multi-frame", frames, "", []string{"multi-frame", "dcm2niix"}},
		{"slice sizes differ", sizes, "", []string{"2×4 pixels"}},
		{"orientations differ", orient, "", []string{"ImageOrientationPatient"}},
		{"skewed cosines", skew, "", []string{"not orthogonal unit vectors"}},
		{"same position", same, "", []string{"same position"}},
		{"RLE", rle, "", []string{"RLE Lossless", "gdcmconv --raw"}},
		{"deflated", deflated, "", []string{"Deflated Explicit VR Little Endian", "not supported"}},
		{"big endian", bigEndian, "", []string{"Explicit VR Big Endian"}},
		{"unknown syntax", unknown, "", []string{`unknown transfer syntax "1.2.3.4.5"`}},
		{"unknown series", good, "9.9", []string{"no series 9.9", "1.2.3.4 \"go\" (3 slices)"}},
		{"file of another series", filepath.Join(good, "s001"), "9.9", []string{"belongs to series 1.2.3.4, not --series 9.9"}},
		{"series of a non-DICOM file", npyFile, "9.9", []string{"not a DICOM file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			_, err := Load(c.path, Options{Series: c.series})
			runtime.ReadMemStats(&m1)
			msg := fmt.Sprint(err)
			if err == nil || strings.Contains(msg, "\n") {
				t.Fatalf("got %q, want a one-line error", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if a := m1.TotalAlloc - m0.TotalAlloc; a > 4<<20 {
				t.Errorf("allocated %d bytes", a)
			}
		})
	}
	if _, err := Load(good, Options{}); err != nil {
		t.Errorf("the good series: %v", err)
	}
}

// TestDICOMMatchesDcm2niix converts pydicom-written series with dcm2niix
// and checks that the NIfTI holds the same voxel values (up to the flips
// dcm2niix applies), where dcm2niix and pydicom are installed. It logs both
// geometries.
func TestDICOMMatchesDcm2niix(t *testing.T) {
	conv, err := exec.LookPath("dcm2niix")
	if err != nil {
		t.Skip("dcm2niix not installed (Debian: apt-get install dcm2niix)")
	}
	root := t.TempDir()
	d := func(n string) string { return filepath.Join(root, n) }
	axial := pySeries{Dir: d("axial"), UID: "1.2.826.0.1.3680043.8.498.20", Desc: "axial", Syntax: "explicit", Rows: 6, Cols: 5,
		PS: []string{"0.7", "0.9"}, IOP: []string{"1", "0", "0", "0", "1", "0"}, BitsStored: 16, Signed: true, Slope: "1", Intercept: "-1024", Seed: 11,
		IPPs: dcmPositions(8, [3]float64{-10.5, 20.25, -30}, [3]float64{0, 0, 2.5})}
	oblique := axial
	oblique.Dir, oblique.UID, oblique.Desc, oblique.Syntax, oblique.IOP, oblique.Seed = d("oblique"), "1.2.826.0.1.3680043.8.498.21", "oblique", "implicit", obliqueIOP, 12
	oblique.IPPs = dcmPositions(7, [3]float64{100.25, -50.5, 12}, [3]float64{0.6, 0.8, 0.75})
	oblique.Slope, oblique.Intercept = "2.5", "-1000.5"
	writePySeries(t, []pySeries{axial, oblique})
	for _, s := range []pySeries{axial, oblique} {
		t.Run(s.Desc, func(t *testing.T) {
			out := d("nii-" + s.Desc)
			os.MkdirAll(out, 0o755)
			if b, err := exec.Command(conv, "-z", "n", "-b", "n", "-f", "vol", "-o", out, s.Dir).CombinedOutput(); err != nil {
				t.Fatalf("dcm2niix: %v\n%s", err, b)
			}
			ours, err := Load(s.Dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			nii, err := Load(filepath.Join(out, "vol.nii"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if nii.N != ours.N {
				t.Fatalf("dcm2niix shape %v, ours %v", nii.N, ours.N)
			}
			flip, ok := dcmMatchFlips(ours, nii)
			if !ok {
				t.Fatalf("no flip of the axes makes dcm2niix's values equal ours")
			}
			// dcm2niix's sform, read from its header, against our geometry:
			// logged, not checked (the NIfTI reader's geometry is not ours
			// to test here).
			hdr, _ := os.ReadFile(filepath.Join(out, "vol.nii"))
			sf := dcmSform(hdr)
			worst := 0.0
			for _, idx := range dcmCorners(int(ours.N[0]), int(ours.N[1]), int(ours.N[2])) {
				var f [3]float64
				for a := range 3 {
					f[a] = float64(idx[a])
					if flip[a] {
						f[a] = float64(ours.N[a]-1) - f[a]
					}
				}
				w := dcmWorld(ours, idx)
				for r := range 3 {
					ras := float64(sf[r][3])
					for a := range 3 {
						ras += float64(sf[r][a]) * f[a]
					}
					if r < 2 {
						ras = -ras // RAS to LPS
					}
					worst = max(worst, math.Abs(ras-w[r]))
				}
			}
			t.Logf("dcm2niix's values equal ours with axes flipped %v; its sform (RAS) %v puts the voxels %.2g mm from our positions at worst; tapeloop's NIfTI reader gives origin %v spacing %v direction %v",
				flip, sf, worst, nii.Origin, nii.Spacing, nii.Direction)
		})
	}
}

// dcmMatchFlips finds the axes to flip in b so that its values equal a's (to
// 1e-4 relative, for the NIfTI's float32 scaling).
func dcmMatchFlips(a, b *Volume) ([3]bool, bool) {
	nx, ny, nz := a.N[0], a.N[1], a.N[2]
	for m := range 8 {
		f := [3]bool{m&1 != 0, m&2 != 0, m&4 != 0}
		ok := true
		for i := int64(0); i < nx && ok; i++ {
			for j := int64(0); j < ny && ok; j++ {
				for k := int64(0); k < nz && ok; k++ {
					bi, bj, bk := i, j, k
					if f[0] {
						bi = nx - 1 - i
					}
					if f[1] {
						bj = ny - 1 - j
					}
					if f[2] {
						bk = nz - 1 - k
					}
					x, y := a.V[(i*ny+j)*nz+k], b.V[(bi*ny+bj)*nz+bk]
					ok = math.Abs(float64(x-y)) <= 1e-4*math.Max(1, math.Abs(float64(x)))
				}
			}
		}
		if ok {
			return f, true
		}
	}
	return [3]bool{}, false
}

// dcmSform reads srow_x, srow_y, srow_z of a NIfTI-1 header.
func dcmSform(h []byte) [3][4]float32 {
	var s [3][4]float32
	if len(h) < 348 {
		return s
	}
	for r := range 3 {
		for c := range 4 {
			s[r][c] = math.Float32frombits(binary.LittleEndian.Uint32(h[280+16*r+4*c:]))
		}
	}
	return s
}

// FuzzDICOM parses one file and decodes its pixels: it must not panic, and
// what it allocates stays proportional to the file's size, whatever lengths
// the file claims.
func FuzzDICOM(f *testing.F) {
	slice := testutil.DICOMSlice{Series: "1.2.3", Description: "fuzz", Instance: 1, IPP: [3]float64{1, 2, 3},
		IOP: [6]float64{1, 0, 0, 0, 1, 0}, PixelSpacing: [2]float64{1, 1}, Rows: 2, Cols: 3, Slope: 1,
		Pixels: []int16{1, 2, 3, 4, 5, -6}, Signed: true}
	for _, syntax := range []string{syntaxExplicitLE, syntaxImplicitLE, "1.2.840.10008.1.2.4.90"} {
		for _, seq := range []bool{false, true} {
			s := slice
			s.Syntax, s.Sequences = syntax, seq
			f.Add(testutil.DICOMFile(s))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s, px, err := readDICOMSlice(b)
		runtime.ReadMemStats(&m1)
		if a := m1.TotalAlloc - m0.TotalAlloc; a > 16*uint64(len(b))+1<<20 {
			t.Fatalf("allocated %d bytes for a %d-byte file", a, len(b))
		}
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		if len(px) != s.rows*s.cols || int64(len(px))*int64(s.bitsAllocated/8) > int64(len(b)) {
			t.Fatalf("%d pixels of %d×%d from %d bytes", len(px), s.rows, s.cols, len(b))
		}
	})
}
