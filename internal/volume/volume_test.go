package volume

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// xFastest lays out a function of (x, y, z) as NIfTI and MetaImage store it.
func xFastest(nx, ny, nz int, f func(x, y, z int) float64) []float64 {
	var out []float64
	for z := range nz {
		for y := range ny {
			for x := range nx {
				out = append(out, f(x, y, z))
			}
		}
	}
	return out
}

func value(x, y, z int) float64 { return float64(100*x + 10*y + z) }

func checkVolume(t *testing.T, v *Volume, nx, ny, nz int, spacing, origin [3]float64) {
	t.Helper()
	if v.N != [3]int64{int64(nx), int64(ny), int64(nz)} {
		t.Fatalf("shape %v, want (%d, %d, %d)", v.N, nx, ny, nz)
	}
	for x := range nx {
		for y := range ny {
			for z := range nz {
				if got := v.V[(x*ny+y)*nz+z]; float64(got) != value(x, y, z) {
					t.Fatalf("voxel (%d, %d, %d) = %v, want %v", x, y, z, got, value(x, y, z))
				}
			}
		}
	}
	if v.Spacing != spacing || v.Origin != origin {
		t.Errorf("spacing %v origin %v, want %v %v", v.Spacing, v.Origin, spacing, origin)
	}
}

// niftiFile builds a NIfTI-1 single file of int16 voxels.
func niftiFile(o binary.ByteOrder, nx, ny, nz int, pix [3]float32, srow [3][4]float32, sform int16) []byte {
	h := make([]byte, 352)
	o.PutUint32(h[0:], 348)
	dims := []int16{3, int16(nx), int16(ny), int16(nz), 1, 1, 1, 1}
	for i, d := range dims {
		o.PutUint16(h[40+2*i:], uint16(d))
	}
	o.PutUint16(h[70:], 4) // int16
	o.PutUint16(h[72:], 16)
	o.PutUint32(h[76:], math.Float32bits(1))
	for i, p := range pix {
		o.PutUint32(h[80+4*i:], math.Float32bits(p))
	}
	o.PutUint32(h[108:], math.Float32bits(352))
	o.PutUint16(h[254:], uint16(sform))
	for i := range 3 {
		for j := range 4 {
			o.PutUint32(h[280+16*i+4*j:], math.Float32bits(srow[i][j]))
		}
	}
	copy(h[344:], "n+1\x00")
	for _, v := range xFastest(nx, ny, nz, value) {
		var b [2]byte
		o.PutUint16(b[:], uint16(int16(v)))
		h = append(h, b[:]...)
	}
	return h
}

func TestLoadEveryFormat(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	const nx, ny, nz = 4, 3, 5
	diag := [3][4]float32{{0.5, 0, 0, -10}, {0, 0.75, 0, 20.5}, {0, 0, 2, 3}}

	// NIfTI, both byte orders, plain and gzipped.
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		b := niftiFile(o, nx, ny, nz, [3]float32{0.5, 0.75, 2}, diag, 2)
		os.WriteFile(p("v.nii"), b, 0o644)
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write(b)
		w.Close()
		os.WriteFile(p("v.nii.gz"), gz.Bytes(), 0o644)
		os.WriteFile(p("gz.nii"), gz.Bytes(), 0o644) // gzipped, named .nii: read as ITK reads it
		for _, name := range []string{"v.nii", "v.nii.gz", "gz.nii"} {
			v, err := Load(p(name), Options{})
			if err != nil {
				t.Fatalf("%s (%v): %v", name, o, err)
			}
			// RAS on disk, LPS in memory: x and y negated.
			checkVolume(t, v, nx, ny, nz, [3]float64{0.5, 0.75, 2}, [3]float64{10, -20.5, 3})
			if want := [3][3]float64{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}; v.Direction != want {
				t.Errorf("%s: direction %v, want %v", name, v.Direction, want)
			}
			if v, err = Load(p(name), Options{Frame: RAS}); err != nil || v.Origin != [3]float64{-10, 20.5, 3} || !v.Aligned() {
				t.Errorf("%s in RAS: origin %v direction %v (%v), want (-10, 20.5, 3) and the identity", name, v.Origin, v.Direction, err)
			}
		}
	}
	// A sheared affine is refused.
	rot := diag
	rot[0][1] = 0.1
	os.WriteFile(p("r.nii"), niftiFile(binary.LittleEndian, nx, ny, nz, [3]float32{0.5, 0.75, 2}, rot, 2), 0o644)
	if _, err := Load(p("r.nii"), Options{}); err == nil || !strings.Contains(err.Error(), "shear") {
		t.Errorf("sheared NIfTI: err %v, want one about the shear", err)
	}

	// MetaImage: .mha with raw and zlib data, .mhd with a data file, big endian.
	data := func(big bool) []byte {
		var b []byte
		for _, v := range xFastest(nx, ny, nz, value) {
			if big {
				b = binary.BigEndian.AppendUint32(b, math.Float32bits(float32(v)))
			} else {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
			}
		}
		return b
	}
	hdr := "ObjectType = Image\nNDims = 3\nDimSize = 4 3 5\nElementSpacing = 0.5 0.75 2\nOffset = -10 20.5 3\nElementType = MET_FLOAT\n"
	os.WriteFile(p("v.mha"), append([]byte(hdr+"ElementDataFile = LOCAL\n"), data(false)...), 0o644)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(data(false))
	zw.Close()
	os.WriteFile(p("z.mha"), append([]byte(hdr+"CompressedData = True\nElementDataFile = LOCAL\n"), z.Bytes()...), 0o644)
	os.WriteFile(p("v.raw"), data(true), 0o644)
	os.WriteFile(p("v.mhd"), []byte(hdr+"BinaryDataByteOrderMSB = True\nElementDataFile = v.raw\n"), 0o644)
	for _, name := range []string{"v.mha", "z.mha", "v.mhd"} {
		v, err := Load(p(name), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkVolume(t, v, nx, ny, nz, [3]float64{0.5, 0.75, 2}, [3]float64{-10, 20.5, 3})
		if !v.Aligned() {
			t.Errorf("%s: direction %v without a TransformMatrix", name, v.Direction)
		}
	}

	// .npy and raw are C order; spacing and origin from the options.
	c := make([]float64, 0, nx*ny*nz)
	for x := range nx {
		for y := range ny {
			for z := range nz {
				c = append(c, value(x, y, z))
			}
		}
	}
	f, _ := os.Create(p("v.npy"))
	w, _ := npy.NewWriter(f, npy.Float64, []int{nx, ny, nz})
	w.Write64(c)
	w.Flush()
	f.Close()
	sp, or := [3]float64{0.5, 0.75, 2}, [3]float64{-10, 20.5, 3}
	v, err := Load(p("v.npy"), Options{Spacing: &sp, Origin: &or})
	if err != nil {
		t.Fatal(err)
	}
	checkVolume(t, v, nx, ny, nz, sp, or)
	if v, err = Load(p("v.npy"), Options{Spacing: &sp, Origin: &or, Frame: RAS}); err != nil || v.Origin != or || !v.Aligned() {
		t.Errorf(".npy in RAS: origin %v direction %v (%v): a frameless volume should not move", v.Origin, v.Direction, err)
	}
	var raw []byte
	for _, x := range c {
		raw = binary.LittleEndian.AppendUint16(raw, uint16(x))
	}
	os.WriteFile(p("c.raw"), raw, 0o644)
	if v, err = Load(p("c.raw"), Options{Shape: [3]int{nx, ny, nz}, Dtype: "uint16", Spacing: &sp, Origin: &or}); err != nil {
		t.Fatal(err)
	}
	checkVolume(t, v, nx, ny, nz, sp, or)
}

func TestLoadRejectsBadVolumes(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	good := niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{1, 1, 1}, [3][4]float32{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, 1)
	os.WriteFile(p("trunc.nii"), good[:len(good)-3], 0o644)
	os.WriteFile(p("junk.nii"), []byte("not a nifti file at all, no"), 0o644)
	os.WriteFile(p("bad.mha"), []byte("NDims = 3\nDimSize = 2 2\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n"), 0o644)
	os.WriteFile(p("short.mha"), []byte("NDims = 3\nDimSize = 2 2 2\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n\x00\x00"), 0o644)
	nan := make([]byte, 0)
	for i := range 8 {
		v := float32(i)
		if i == 5 {
			v = float32(math.NaN())
		}
		nan = binary.LittleEndian.AppendUint32(nan, math.Float32bits(v))
	}
	os.WriteFile(p("nan.mha"), append([]byte("NDims = 3\nDimSize = 2 2 2\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n"), nan...), 0o644)
	os.WriteFile(p("v.raw"), make([]byte, 10), 0o644)
	// Voxels as text, 32 bytes of them: as many as 2³ floats would take.
	os.WriteFile(p("text.mha"), []byte("NDims = 3\nDimSize = 2 2 2\nElementType = MET_FLOAT\nBinaryData = False\nElementDataFile = LOCAL\n1 2 3 4 5 6 7 8 9 10 11 12 13 1"), 0o644)
	f8 := string(make([]byte, 32))
	os.WriteFile(p("nodatafile.mha"), []byte("NDims = 3\nDimSize = 2 2 2\nElementType = MET_FLOAT\n"+strings.Repeat("1 ", 3000)), 0o644)
	os.WriteFile(p("msb.mha"), []byte("NDims = 3\nDimSize = 2 2 2\nElementType = MET_FLOAT\nBinaryDataByteOrderMSB = maybe\nElementDataFile = LOCAL\n"+f8), 0o644)
	os.WriteFile(p("zip.mha"), []byte("NDims = 3\nDimSize = 2 2 2\nElementType = MET_FLOAT\nCompressedData = yes\nElementDataFile = LOCAL\n"+f8), 0o644)
	os.WriteFile(p("bin.mha"), []byte("NDims = 3\nDimSize = 2 2 2\nElementType = MET_FLOAT\nBinaryData = True\nBinaryDataByteOrderMSB = false\nElementDataFile = LOCAL\n"+f8), 0o644)
	if _, err := Load(p("bin.mha"), Options{}); err != nil {
		t.Errorf("bin.mha: %v", err)
	}
	zero := [3]float64{1, 0, 1}
	cases := []struct {
		name string
		opt  Options
		want string
	}{
		{"trunc.nii", Options{}, "truncated"},
		{"junk.nii", Options{}, "NIfTI"},
		{"bad.mha", Options{}, "DimSize"},
		{"short.mha", Options{}, "truncated"},
		{"nan.mha", Options{}, "voxel (1, 0, 1) is NaN"},
		{"text.mha", Options{}, "BinaryData = False: voxels written as text are not supported"},
		{"nodatafile.mha", Options{}, "MetaImage header ends without ElementDataFile: line 4 is data"},
		{"msb.mha", Options{}, `BinaryDataByteOrderMSB: want True or False, got "maybe"`},
		{"zip.mha", Options{}, `CompressedData: want True or False, got "yes"`},
		{"v.raw", Options{Shape: [3]int{2, 2, 2}, Dtype: "uint16"}, "needs 16"},
		{"v.raw", Options{Shape: [3]int{2, 2, 2}, Dtype: "complex"}, "--dtype"},
		{"trunc.nii", Options{Spacing: &zero}, "truncated"},
		{"missing.npy", Options{}, "missing.npy"},
		{"v.xyz", Options{}, "unknown format"},
	}
	for _, c := range cases {
		_, err := Load(p(c.name), c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	v := Phantom(8, 8, 1)
	v.Spacing[1] = 0
	if err := Check(v); err == nil {
		t.Error("zero spacing accepted")
	}
}

func TestPhantomLooksLikeSheppLogan(t *testing.T) {
	v := Phantom(64, 128, 1)
	at := func(x, y, z float64) float32 { // x, y, z in [−1, 1]
		i, j, k := int((x+1)/2*64), int((y+1)/2*64), int((z+1)/2*64)
		return v.V[(i*64+j)*64+k]
	}
	cases := []struct {
		x, y, z float64
		want    float32
	}{
		{0.95, 0.95, 0.95, 0}, // outside the head
		{0, 0.9, 0, 1},        // skull
		{0, 0, 0, 0.2},        // brain
		{0.22, 0, 0, 0},       // a ventricle: 0.2 − 0.2
		{0, 0.35, -0.15, 0.3}, // the large blob
		{0, 0.1, 0.25, 0.3},   // a small feature
	}
	for _, c := range cases {
		if got := at(c.x, c.y, c.z); math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("phantom at (%g, %g, %g) = %v, want %v", c.x, c.y, c.z, got, c.want)
		}
	}
}

func FuzzNIfTI(f *testing.F) {
	f.Add(niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{1, 1, 1}, [3][4]float32{}, 0))
	f.Add(niftiFile(binary.BigEndian, 1, 3, 2, [3]float32{1, 2, 3}, [3][4]float32{}, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := niftiBytes(b)
		if err == nil && int64(len(v.V)) != v.N[0]*v.N[1]*v.N[2] {
			t.Fatalf("volume of %d values for shape %v", len(v.V), v.N)
		}
	})
}

func FuzzMetaHeader(f *testing.F) {
	f.Add("ObjectType = Image\nNDims = 3\nDimSize = 4 3 5\nElementSpacing = 0.5 0.75 2\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n")
	f.Add("NDims = 3\nDimSize = 1 1 1\nElementType = MET_UCHAR\nCompressedData = True\nElementDataFile = x.raw\n")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseMetaHeader(bufio.NewReader(strings.NewReader(s)))
		if err == nil && (h.dims[0] < 1 || h.dims[1] < 1 || h.dims[2] < 1 || h.etype == "") {
			t.Fatalf("accepted header with dims %v type %q", h.dims, h.etype)
		}
	})
}

// TestLoadWarnsOfExtraData: a MetaImage or NIfTI file holding more voxel
// data than its header describes (a wrong ElementType or DimSize, say) is
// read as described, with one warning naming the file and the excess; a
// file that fits gives none.
func TestLoadWarnsOfExtraData(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	hdr := "NDims = 3\nDimSize = 2 2 2\nElementType = MET_SHORT\nElementDataFile = LOCAL\n"
	os.WriteFile(p("fits.mha"), append([]byte(hdr), make([]byte, 16)...), 0o644)
	os.WriteFile(p("floats.mha"), append([]byte(hdr), make([]byte, 32)...), 0o644) // float32 data, MET_SHORT header
	os.WriteFile(p("data.raw"), make([]byte, 20), 0o644)
	os.WriteFile(p("list.mhd"), []byte(strings.Replace(hdr, "LOCAL", "data.raw", 1)), 0o644)
	nii := niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{1, 1, 1}, [3][4]float32{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, 1)
	os.WriteFile(p("fits.nii"), nii, 0o644)
	os.WriteFile(p("long.nii"), append(slices.Clone(nii), make([]byte, 40)...), 0o644)
	for _, c := range []struct {
		name, want string
	}{
		{"fits.mha", ""},
		{"floats.mha", "floats.mha: the file holds 32 bytes of voxel data, 16 more than its DimSize and ElementType describe"},
		{"list.mhd", "list.mhd: its data file " + p("data.raw") + " holds 20 bytes of voxel data, 4 more than"},
		{"fits.nii", ""},
		{"long.nii", "long.nii: the file holds"},
	} {
		var warn bytes.Buffer
		if _, err := Load(p(c.name), Options{Warn: &warn}); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		switch got := warn.String(); {
		case c.want == "" && got != "":
			t.Errorf("%s: warned %q", c.name, got)
		case c.want != "" && (!strings.Contains(got, c.want) || strings.Count(got, "\n") != 1):
			t.Errorf("%s: warned %q, want one line with %q", c.name, got, c.want)
		}
	}
}
