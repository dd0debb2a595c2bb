package volume

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// near reports whether a and b agree to tol in every component.
func near3(a, b [3]float64, tol float64) bool {
	for i := range 3 {
		if !(math.Abs(a[i]-b[i]) <= tol) {
			return false
		}
	}
	return true
}

func near33(a, b [3][3]float64, tol float64) bool {
	for i := range 3 {
		if !near3(a[i], b[i], tol) {
			return false
		}
	}
	return true
}

// setQform writes a qform into a NIfTI-1 header: its code, quaternion
// (b, c, d), offset and qfac (pixdim[0]).
func setQform(b []byte, code int16, q, off [3]float32, qfac float32) {
	o := binary.LittleEndian
	o.PutUint16(b[252:], uint16(code))
	o.PutUint32(b[76:], math.Float32bits(qfac))
	for i := range 3 {
		o.PutUint32(b[256+4*i:], math.Float32bits(q[i]))
		o.PutUint32(b[268+4*i:], math.Float32bits(off[i]))
	}
}

// TestNIfTIAffine reads headers whose geometry is worked out by hand, in
// LPS (NIfTI's RAS with x and y negated): origin the centre of voxel 0.
func TestNIfTIAffine(t *testing.T) {
	c30, s30 := math.Cos(math.Pi/6), math.Sin(math.Pi/6)
	r45 := float32(math.Sqrt(0.5))
	type want struct {
		origin, spacing [3]float64
		dir             [3][3]float64
	}
	cases := []struct {
		name  string
		make  func() []byte
		want  want
		warn  string // a warning expected
		error string // an error expected instead
	}{
		{"sform diagonal", func() []byte {
			return niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{0.5, 0.75, 2}, [3][4]float32{{0.5, 0, 0, -10}, {0, 0.75, 0, 20.5}, {0, 0, 2, 3}}, 1)
		}, want{[3]float64{10, -20.5, 3}, [3]float64{0.5, 0.75, 2}, [3][3]float64{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}}, "", ""},
		{"sform flipped (LAS)", func() []byte {
			return niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{1, 1, 1}, [3][4]float32{{-1.5, 0, 0, 30}, {0, 1, 0, -4}, {0, 0, 2.5, 7}}, 2)
		}, want{[3]float64{-30, 4, 7}, [3]float64{1.5, 1, 2.5}, [3][3]float64{{1, 0, 0}, {0, -1, 0}, {0, 0, 1}}}, "", ""},
		{"sform rotated 30° about z", func() []byte {
			// Columns: 2·(cos, sin, 0), 3·(−sin, cos, 0), 4·(0, 0, 1).
			m := [3][4]float32{{float32(2 * c30), float32(-3 * s30), 0, 1}, {float32(2 * s30), float32(3 * c30), 0, 2}, {0, 0, 4, 3}}
			return niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{2, 3, 4}, m, 4)
		}, want{[3]float64{-1, -2, 3}, [3]float64{2, 3, 4}, [3][3]float64{{-c30, s30, 0}, {-s30, -c30, 0}, {0, 0, 1}}}, "", ""},
		{"qform 90° about z, qfac -1", func() []byte {
			b := niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{2, 3, 4}, [3][4]float32{}, 0)
			setQform(b, 1, [3]float32{0, 0, r45}, [3]float32{1, 2, 3}, -1)
			return b
		}, // R = [[0,−1,0],[1,0,0],[0,0,1]], R·diag(1,1,−1), rows 0 and 1 negated.
			want{[3]float64{-1, -2, 3}, [3]float64{2, 3, 4}, [3][3]float64{{0, 1, 0}, {-1, 0, 0}, {0, 0, -1}}}, "", ""},
		{"qform and sform disagree: the sform whole", func() []byte {
			b := niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{5, 6, 7}, [3][4]float32{{0.5, 0, 0, -10}, {0, 0.75, 0, 20.5}, {0, 0, 2, 3}}, 2)
			setQform(b, 1, [3]float32{0, 0, r45}, [3]float32{100, 200, 300}, 1)
			return b
		}, want{[3]float64{10, -20.5, 3}, [3]float64{0.5, 0.75, 2}, [3][3]float64{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}}, "", ""},
		{"neither: pixdim alone", func() []byte {
			return niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{0.5, 0.75, 2}, [3][4]float32{{9, 9, 9, 9}, {9, 9, 9, 9}, {9, 9, 9, 9}}, 0)
		}, want{[3]float64{0, 0, 0}, [3]float64{0.5, 0.75, 2}, [3][3]float64{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}}, "neither an sform nor a qform", ""},
		{"metres", func() []byte {
			b := niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{0.0005, 0.00075, 0.002}, [3][4]float32{{0.0005, 0, 0, -0.01}, {0, 0.00075, 0, 0.0205}, {0, 0, 0.002, 0.003}}, 1)
			b[123] = 1
			return b
		}, want{[3]float64{10, -20.5, 3}, [3]float64{0.5, 0.75, 2}, [3][3]float64{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}}, "", ""},
		{"microns (with a time unit)", func() []byte {
			b := niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{500, 750, 2000}, [3][4]float32{{500, 0, 0, -10000}, {0, 750, 0, 20500}, {0, 0, 2000, 3000}}, 1)
			b[123] = 3 | 8 // microns, seconds
			return b
		}, want{[3]float64{10, -20.5, 3}, [3]float64{0.5, 0.75, 2}, [3][3]float64{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}}, "", ""},
		{"sheared sform", func() []byte {
			return niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{1, 1, 1}, [3][4]float32{{1, 0.2, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, 1)
		}, want{}, "", "not at right angles"},
		{"zero sform column", func() []byte {
			return niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{1, 1, 1}, [3][4]float32{{1, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 1, 0}}, 1)
		}, want{}, "", "index axis 1 has a zero"},
		{"quaternion too long", func() []byte {
			b := niftiFile(binary.LittleEndian, 2, 2, 2, [3]float32{1, 1, 1}, [3][4]float32{}, 0)
			setQform(b, 1, [3]float32{0.9, 0.9, 0}, [3]float32{}, 1)
			return b
		}, want{}, "", "quaternion"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".nii")
			os.WriteFile(path, c.make(), 0o644)
			var warn bytes.Buffer
			v, err := Load(path, Options{Warn: &warn})
			if c.error != "" {
				if err == nil || !strings.Contains(err.Error(), c.error) {
					t.Fatalf("error %v, want one mentioning %q", err, c.error)
				}
				if strings.Count(err.Error(), "\n") > 0 {
					t.Errorf("error %q is more than one line", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !near3(v.Origin, c.want.origin, 1e-4) || !near3(v.Spacing, c.want.spacing, 1e-6) || !near33(v.Direction, c.want.dir, 1e-6) {
				t.Errorf("origin %v spacing %v direction %v,\nwant %v %v %v", v.Origin, v.Spacing, v.Direction, c.want.origin, c.want.spacing, c.want.dir)
			}
			if (c.warn == "") != (warn.Len() == 0) || !strings.Contains(warn.String(), c.warn) {
				t.Errorf("warning %q, want %q", warn.String(), c.warn)
			}
		})
	}
}

// metaImage writes a .mha (LOCAL) or .mhd + .raw of float32 voxels
// value(x, y, z), header lines extra before ElementDataFile, prefix bytes
// before the data and suffix after it.
func metaImage(t *testing.T, path string, nx, ny, nz int, extra string, local bool, prefix, suffix []byte) {
	t.Helper()
	var data []byte
	for _, v := range xFastest(nx, ny, nz, value) {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
	}
	data = append(append(append([]byte{}, prefix...), data...), suffix...)
	hdr := fmt.Sprintf("ObjectType = Image\nNDims = 3\nDimSize = %d %d %d\nElementType = MET_FLOAT\n%s", nx, ny, nz, extra)
	if local {
		os.WriteFile(path, append([]byte(hdr+"ElementDataFile = LOCAL\n"), data...), 0o644)
		return
	}
	raw := strings.TrimSuffix(path, filepath.Ext(path)) + ".raw"
	os.WriteFile(raw, data, 0o644)
	os.WriteFile(path, []byte(hdr+"ElementDataFile = "+filepath.Base(raw)+"\n"), 0o644)
}

// TestMetaImageGeometry: TransformMatrix and its synonyms (the direction of
// index axis a as the a-th triple), Offset and its synonyms (the centre of
// voxel 0), and HeaderSize.
func TestMetaImageGeometry(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	const nx, ny, nz = 4, 3, 5
	c30, s30 := math.Cos(math.Pi/6), math.Sin(math.Pi/6)
	rot := fmt.Sprintf("%.17g %.17g 0 %.17g %.17g 0 0 0 1", c30, s30, -s30, c30) // axis 0 along (cos, sin, 0)
	cases := []struct {
		name, extra string
		local       bool
		prefix      int
		suffix      int
		origin      [3]float64
		dir         [3][3]float64
		error       string
	}{
		{"ITK's RAS flip", "TransformMatrix = -1 0 0 0 -1 0 0 0 1\nOffset = 10 -20.5 3\nElementSpacing = 0.5 0.75 2\n", true, 0, 0,
			[3]float64{10, -20.5, 3}, [3][3]float64{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}, ""},
		{"Orientation, Origin", "Orientation = " + rot + "\nOrigin = 1 2 3\nElementSpacing = 0.5 0.75 2\n", true, 0, 0,
			[3]float64{1, 2, 3}, [3][3]float64{{c30, -s30, 0}, {s30, c30, 0}, {0, 0, 1}}, ""},
		{"Rotation, Position", "Rotation = 0 0 1 1 0 0 0 1 0\nPosition = -1 -2 -3\nElementSpacing = 0.5 0.75 2\n", true, 0, 0,
			[3]float64{-1, -2, -3}, [3][3]float64{{0, 1, 0}, {0, 0, 1}, {1, 0, 0}}, ""},
		{"HeaderSize in a data file", "HeaderSize = 100\nElementSpacing = 0.5 0.75 2\n", false, 100, 0,
			[3]float64{}, identity, ""},
		{"HeaderSize -1 in a data file", "HeaderSize = -1\nElementSpacing = 0.5 0.75 2\n", false, 37, 0,
			[3]float64{}, identity, ""},
		{"HeaderSize -1 in a .mha", "HeaderSize = -1\nElementSpacing = 0.5 0.75 2\n", true, 21, 0,
			[3]float64{}, identity, ""},
		{"HeaderSize short", "HeaderSize = 100\nElementSpacing = 0.5 0.75 2\n", false, 100, -1,
			[3]float64{}, identity, "truncated"},
		{"HeaderSize inside a .mha's header", "HeaderSize = 10\nElementSpacing = 0.5 0.75 2\n", true, 0, 0,
			[3]float64{}, identity, "points inside the header"},
		{"HeaderSize -1 compressed", "HeaderSize = -1\nCompressedData = True\n", true, 0, 0,
			[3]float64{}, identity, "HeaderSize = -1 with CompressedData"},
		{"sheared TransformMatrix", "TransformMatrix = 1 0 0 0.3 1 0 0 0 1\n", true, 0, 0,
			[3]float64{}, identity, "shear"},
		{"TransformMatrix scaled", "TransformMatrix = 2 0 0 0 1 0 0 0 1\n", true, 0, 0,
			[3]float64{}, identity, "not a unit vector"},
		{"TransformMatrix of 6", "TransformMatrix = 1 0 0 0 1 0\n", true, 0, 0,
			[3]float64{}, identity, "want 9 numbers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := strings.ReplaceAll(c.name, " ", "_")
			ext := ".mhd"
			if c.local {
				ext = ".mha"
			}
			var suffix []byte
			prefix := bytes.Repeat([]byte{0xff}, c.prefix)
			if c.suffix < 0 { // a data file a byte short
				metaImage(t, p(name+ext), nx, ny, nz, c.extra, c.local, prefix, nil)
				raw := p(name + ".raw")
				b, _ := os.ReadFile(raw)
				os.WriteFile(raw, b[:len(b)-1], 0o644)
			} else {
				metaImage(t, p(name+ext), nx, ny, nz, c.extra, c.local, prefix, suffix)
			}
			v, err := Load(p(name+ext), Options{})
			if c.error != "" {
				if err == nil || !strings.Contains(err.Error(), c.error) {
					t.Fatalf("error %v, want one mentioning %q", err, c.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkVolume(t, v, nx, ny, nz, [3]float64{0.5, 0.75, 2}, c.origin)
			if !near33(v.Dir(), c.dir, 1e-12) {
				t.Errorf("direction %v, want %v", v.Dir(), c.dir)
			}
		})
	}
	// A .mha's positive HeaderSize is the data's offset from the file's
	// start, as ITK reads it.
	hdr := "ObjectType = Image\nNDims = 3\nDimSize = 4 3 5\nElementType = MET_FLOAT\nElementSpacing = 0.5 0.75 2\nHeaderSize = 256\nElementDataFile = LOCAL\n"
	var data []byte
	for _, x := range xFastest(nx, ny, nz, value) {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(x)))
	}
	b := append([]byte(hdr), make([]byte, 256-len(hdr))...)
	os.WriteFile(p("offset.mha"), append(b, data...), 0o644)
	v, err := Load(p("offset.mha"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkVolume(t, v, nx, ny, nz, [3]float64{0.5, 0.75, 2}, [3]float64{})

	// In RAS the same file has x and y negated.
	metaImage(t, p("ras.mha"), nx, ny, nz, "TransformMatrix = -1 0 0 0 -1 0 0 0 1\nOffset = 10 -20.5 3\nElementSpacing = 0.5 0.75 2\n", true, nil, nil)
	if v, err = Load(p("ras.mha"), Options{Frame: RAS}); err != nil || v.Origin != [3]float64{-10, 20.5, 3} || !v.Aligned() {
		t.Errorf("in RAS: origin %v direction %v (%v), want (-10, 20.5, 3) and the identity", v.Origin, v.Direction, err)
	}

	// Compressed data after HeaderSize bytes of a data file.
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(data)
	zw.Close()
	os.WriteFile(p("z.raw"), append(make([]byte, 64), z.Bytes()...), 0o644)
	os.WriteFile(p("z.mhd"), []byte("NDims = 3\nDimSize = 4 3 5\nElementType = MET_FLOAT\nElementSpacing = 0.5 0.75 2\nCompressedData = True\nHeaderSize = 64\nElementDataFile = z.raw\n"), 0o644)
	if v, err = Load(p("z.mhd"), Options{}); err != nil {
		t.Fatal(err)
	}
	checkVolume(t, v, nx, ny, nz, [3]float64{0.5, 0.75, 2}, [3]float64{})
}

// TestGeometryHelpers: World, Centre, the local frame and Pad on an
// oblique, flipped volume.
func TestGeometryHelpers(t *testing.T) {
	c, s := math.Cos(0.4), math.Sin(0.4)
	v := &Volume{N: [3]int64{4, 6, 8}, Origin: [3]float64{5, -7, 9}, Spacing: [3]float64{0.5, 1.5, 2},
		Direction: [3][3]float64{{c, -s, 0}, {s, c, 0}, {0, 0, -1}}, V: make([]float32, 4*6*8)}
	if err := Check(v); err != nil {
		t.Fatal(err)
	}
	// Voxel (1, 2, 3): origin + 0.5·(c, s, 0) + 3·(−s, c, 0) + 6·(0, 0, −1).
	want := [3]float64{5 + 0.5*c - 3*s, -7 + 0.5*s + 3*c, 9 - 6}
	if got := v.World([3]float64{1, 2, 3}); !near3(got, want, 1e-12) {
		t.Errorf("World(1, 2, 3) = %v, want %v", got, want)
	}
	if got, want := v.Centre(), v.World([3]float64{1.5, 2.5, 3.5}); !near3(got, want, 1e-12) {
		t.Errorf("Centre = %v, want %v", got, want)
	}
	// In the local frame voxel idx sits at Origin + idx⊙Spacing.
	if got := v.ToLocal(want); !near3(got, [3]float64{5 + 0.5, -7 + 3, 9 + 6}, 1e-12) {
		t.Errorf("ToLocal = %v", got)
	}
	if l := v.Local(); !l.Aligned() || l.Origin != v.Origin || &l.V[0] != &v.V[0] {
		t.Error("Local is not the same voxels, axis-aligned about the same origin")
	}
	p := Pad(v)
	if got := p.World([3]float64{2, 3, 4}); !near3(got, want, 1e-12) || p.Direction != v.Direction {
		t.Errorf("padded voxel (2, 3, 4) at %v, want %v (the unpadded (1, 2, 3))", got, want)
	}
	bad := *v
	bad.Direction[0][0] = 2
	if err := Check(&bad); err == nil {
		t.Error("a direction that is not orthonormal accepted")
	}
	if _, err := ParseFrame("xyz"); err == nil || err.Error() != `--frame "xyz": want lps or ras` {
		t.Errorf("ParseFrame(xyz): %v", err)
	}
}

// VoxelsOnly reads the values of files whose placement would be refused,
// without warnings.
func TestVoxelsOnlyIgnoresPlacement(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	os.WriteFile(p("shear.nii"), niftiFile(binary.LittleEndian, 4, 3, 5, [3]float32{1, 1, 1}, [3][4]float32{{1, 0.2, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, 1), 0o644)
	os.WriteFile(p("none.nii"), niftiFile(binary.LittleEndian, 4, 3, 5, [3]float32{1, 1, 1}, [3][4]float32{}, 0), 0o644)
	metaImage(t, p("shear.mha"), 4, 3, 5, "TransformMatrix = 1 0 0 0.3 1 0 0 0 1\nElementSpacing = -1 1 1\n", true, nil, nil)
	for _, name := range []string{"shear.nii", "none.nii", "shear.mha"} {
		var warn bytes.Buffer
		v, err := Load(p(name), Options{VoxelsOnly: true, Warn: &warn})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkVolume(t, v, 4, 3, 5, [3]float64{1, 1, 1}, [3]float64{})
		if warn.Len() != 0 {
			t.Errorf("%s: warning %q", name, warn.String())
		}
		if _, err := Load(p(name), Options{Warn: &warn}); name != "none.nii" && err == nil {
			t.Errorf("%s: placement accepted", name)
		}
	}
}
