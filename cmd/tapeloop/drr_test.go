package main

import (
	"bytes"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/urfave/cli/v2"
)

func TestDRROrbitWritesImages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	_, se, code := run(t, "drr", "--quiet", "--size", "48", "--orbit", "36", "--detector", "40x50", "--pixel", "12", "--png", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	h, data, err := npy.ReadAll64(filepath.Join(dir, "drr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if npy.ShapeString(h.Shape) != "(36, 40, 50)" || h.Dtype.Name() != "float32" {
		t.Fatalf("drr.npy is %s %s", h.Dtype.Name(), npy.ShapeString(h.Shape))
	}
	// Every image sees the head in its middle and air in its corners.
	for p := range 36 {
		img := data[p*2000 : (p+1)*2000]
		if img[20*50+25] <= 0 || img[0] != 0 {
			t.Errorf("pose %d: centre %v, corner %v", p, img[20*50+25], img[0])
		}
	}
	for _, name := range []string{"drr_0000.png", "drr_0035.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if b := img.Bounds(); b.Dx() != 50 || b.Dy() != 40 {
			t.Errorf("%s is %v", name, b)
		}
		if _, ok := img.(*image.Gray16); !ok {
			t.Errorf("%s is %T, want 16-bit gray", name, img)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestDRRBadInput(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	vol := make([]float64, 27)
	writeNpy(t, p("v.npy"), []int{3, 3, 3}, vol)
	vol[13] = math.NaN()
	writeNpy(t, p("nan.npy"), []int{3, 3, 3}, vol)
	writeNpy(t, p("flat.npy"), []int{9, 3}, make([]float64, 27))
	good, _ := os.ReadFile(p("v.npy"))
	os.WriteFile(p("trunc.npy"), good[:len(good)-5], 0o644)
	os.WriteFile(p("corrupt.nii"), []byte(strings.Repeat("x", 400)), 0o644)
	pose := `{"source": [1.5,1.5,100], "center": [1.5,1.5,-100], "u": [1,0,0], "v": [0,1,0], "rows": 4, "cols": 4, "pixel": [1,1]}`
	os.WriteFile(p("zero-u.json"), []byte(`{"poses": [`+strings.Replace(pose, `"u": [1,0,0]`, `"u": [0,0,0]`, 1)+`]}`), 0o644)
	os.WriteFile(p("parallel.json"), []byte(`{"poses": [`+strings.Replace(pose, `"v": [0,1,0]`, `"v": [-3,0,0]`, 1)+`]}`), 0o644)
	os.WriteFile(p("rows0.json"), []byte(`{"poses": [`+strings.Replace(pose, `"rows": 4`, `"rows": 0`, 1)+`]}`), 0o644)
	os.WriteFile(p("none.json"), []byte(`{"poses": []}`), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"truncated", []string{"--volume", p("trunc.npy")}, "truncated"},
		{"corrupt nifti", []string{"--volume", p("corrupt.nii")}, "NIfTI"},
		{"not 3-D", []string{"--volume", p("flat.npy")}, "3-D"},
		{"NaN", []string{"--volume", p("nan.npy")}, "voxel (1, 1, 1) is NaN"},
		{"zero spacing", []string{"--volume", p("v.npy"), "--spacing", "1,0,1"}, "spacing"},
		{"negative spacing", []string{"--volume", p("v.npy"), "--spacing", "1,-2,1"}, "spacing"},
		{"zero u", []string{"--volume", p("v.npy"), "--geometry", p("zero-u.json")}, "zero u"},
		{"parallel", []string{"--volume", p("v.npy"), "--geometry", p("parallel.json")}, "parallel"},
		{"rows 0", []string{"--volume", p("v.npy"), "--geometry", p("rows0.json")}, "rows and cols"},
		{"no poses", []string{"--volume", p("v.npy"), "--geometry", p("none.json")}, "no poses"},
		{"raw without shape", []string{"--volume", p("v.raw"), "--dtype", "uint8"}, "--shape"},
		{"missing volume", []string{"--volume", p("nope.npy")}, "nope.npy"},
		{"a rule of the spec", []string{"--size", "8", "--method", "joseph"}, "--method"},
		{"unknown frame", []string{"--size", "8", "--frame", "xyz"}, `--frame "xyz": want lps or ras`},
		{"unknown format", []string{"--size", "8", "--format", "npy,nrrd"}, `--format "npy,nrrd": "nrrd" is not a format`},
		{"empty format", []string{"--size", "8", "--format", ""}, "--format: empty"},
		{"format twice", []string{"--size", "8", "--format", "tif,tiff"}, "tiff is given twice"},
		{"png as a format", []string{"--size", "8", "--format", "png"}, "PNGs are --png"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := p("out-" + strings.ReplaceAll(c.name, " ", "_"))
			_, stderr, code := run(t, append([]string{"drr", "--quiet", "--png", "--out", out}, c.args...)...)
			if code != 1 || !strings.HasPrefix(stderr, "tapeloop: ") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stderr %q; want 1 and one line", code, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("error %q does not mention %q", stderr, c.want)
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("output left: %v", entries)
			}
		})
	}
	// --format without --out: refused, nothing written in the working
	// directory.
	for _, f := range []string{"mha", "npy"} {
		wd := t.TempDir()
		cmd := exec.Command(binary, "drr", "--quiet", "--size", "8", "--orbit", "2", "--detector", "4x4", "--format", f)
		cmd.Dir = wd
		var se bytes.Buffer
		cmd.Stderr = &se
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || se.String() != "tapeloop: --format "+f+": needs --out DIR\n" {
			t.Errorf("--format %s without --out: %v, stderr %q", f, err, se.String())
		}
		if entries, _ := os.ReadDir(wd); len(entries) != 0 {
			t.Errorf("--format %s without --out left %v", f, entries)
		}
	}
	// All rays missing the volume: a warning, not an error.
	os.WriteFile(p("miss.json"), []byte(`{"poses": [`+strings.Replace(strings.Replace(pose, `[1.5,1.5,100]`, `[500,500,100]`, 1), `[1.5,1.5,-100]`, `[500,500,-100]`, 1)+`]}`), 0o644)
	_, stderr, code := run(t, "drr", "--quiet", "--volume", p("v.npy"), "--geometry", p("miss.json"))
	if code != 0 || !strings.Contains(stderr, "missed the volume") {
		t.Errorf("all-miss geometry: exit %d, stderr %q", code, stderr)
	}
}

// --frame ras takes the geometry in RAS: a pose there renders what the
// same pose with x and y negated (points and detector axes) renders in
// LPS; an asymmetric volume placed by ITK's RAS flip tells the frames apart.
func TestDRRFrameRAS(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	const nx, ny, nz = 6, 5, 4
	var data []byte
	for z := range nz {
		for y := range ny {
			for x := range nx {
				v := float32(0)
				if x < 2 && y >= 3 { // a bar in one corner
					v = 1
				}
				data = bin.LittleEndian.AppendUint32(data, math.Float32bits(v+0.01*float32(z)))
			}
		}
	}
	hdr := fmt.Sprintf("NDims = 3\nDimSize = %d %d %d\nTransformMatrix = -1 0 0 0 -1 0 0 0 1\nOffset = 3 -2 1\nElementSpacing = 1 1.5 2\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n", nx, ny, nz)
	os.WriteFile(p("v.mha"), append([]byte(hdr), data...), 0o644)
	pose := func(f float64, sx, sy float64) string { // looking down z from above, detector in x-y
		return fmt.Sprintf(`{"poses": [{"source": [%g,%g,500], "center": [%g,%g,-300], "u": [%g,0,0], "v": [0,%g,0], "rows": 24, "cols": 24, "pixel": [0.75,0.75]}]}`,
			f*sx, f*sy, f*sx, f*sy, f, f)
	}
	// The volume's centre in LPS: (3, −2, 1) + diag(−1, −1, 1)·((n − 1)/2⊙s).
	cx, cy := 3-2.5*1.0, -2-2*1.5
	os.WriteFile(p("lps.json"), []byte(pose(1, cx, cy)), 0o644)
	os.WriteFile(p("ras.json"), []byte(pose(-1, cx, cy)), 0o644)
	render := func(name string, args ...string) []float64 {
		out := p("out-" + name)
		_, se, code := run(t, append([]string{"drr", "--quiet", "--volume", p("v.mha"), "--out", out}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, se)
		}
		_, img, err := npy.ReadAll64(filepath.Join(out, "drr.npy"))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	lps := render("lps", "--geometry", p("lps.json"))
	ras := render("ras", "--geometry", p("ras.json"), "--frame", "ras")
	wrong := render("wrong", "--geometry", p("ras.json"))
	same, differ := true, false
	for i := range lps {
		if math.Abs(lps[i]-ras[i]) > 1e-5 {
			same = false
		}
		if math.Abs(lps[i]-wrong[i]) > 0.1 {
			differ = true
		}
	}
	if !same {
		t.Error("the RAS pose with --frame ras renders differently from the LPS pose")
	}
	if !differ {
		t.Error("the RAS pose without --frame ras renders the same: the test cannot tell the frames apart")
	}
}

// Every option of drr.Config has a drr flag that sets it.
func TestDRRFlagsCoverConfig(t *testing.T) {
	checkFlagsCover(t, drrCommand, drr.Config{}, func(c *cli.Context) (any, error) { return drrSpec(c) },
		map[string]string{"method": "trilinear"})
}

// TestDRRGeometryFaults: --sid taken for radiography's SID puts the
// detector inside the phantom: one warning line naming the distance, the
// images still written; --strict makes it exit 1 with nothing written.
// --sad is --sid by its other name. Poses whose every ray misses the
// volume are counted after the run, and refused with --strict.
func TestDRRGeometryFaults(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	// The 32 mm phantom: sdd 1000 with sid 990 puts the detector 10 mm
	// past its centre, 6 mm inside its far face (the detector's corners
	// reach 2 mm further out along it).
	base := []string{"drr", "--size", "32", "--spacing", "1,1,1", "--orbit", "3", "--detector", "4x4", "--pixel", "1", "--sdd", "1000"}
	_, se, code := run(t, append(base, "--sid", "990", "--out", p("warned"))...)
	want := "tapeloop: warning: 3 of 3 poses have their detector reaching into the volume (pose 0: 6 mm inside its nearest face); --sid is the source–isocentre distance, --sdd the source–detector (radiography's SID)\n"
	if code != 0 || !strings.Contains(se, want) {
		t.Errorf("exit %d, stderr %q; want 0 and the line %q", code, se, want)
	}
	if _, err := os.Stat(p("warned/drr.npy")); err != nil {
		t.Errorf("warned, but the images are not written: %v", err)
	}
	_, se, code = run(t, append(base, "--sad", "990", "--strict", "--out", p("strict"))...)
	if code != 1 || !strings.HasPrefix(se, "tapeloop: geometry: --strict: 3 of 3 poses have their detector reaching into the volume (pose 0: 6 mm") || strings.Count(se, "\n") != 1 {
		t.Errorf("--strict: exit %d, stderr %q; want 1 and one line", code, se)
	}
	if _, err := os.Stat(p("strict")); err == nil {
		t.Error("--strict refused the run, but its output directory exists")
	}
	// A sound orbit: no warning.
	if _, se, code := run(t, append(base, "--sid", "500", "--quiet")...); code != 0 || strings.Contains(se, "warning") {
		t.Errorf("a sound orbit: exit %d, stderr %q", code, se)
	}
	// A 16 mm cube of ones about (7.5, 7.5, 7.5): pose 0 through it, pose
	// 1 300 mm above it.
	writeNpy(t, p("cube.npy"), []int{16, 16, 16}, ones(16*16*16))
	geo := `{"poses": [
 {"source": [7.5, -500, 7.5], "center": [7.5, 500, 7.5], "u": [1, 0, 0], "v": [0, 0, 1], "rows": 4, "cols": 4, "pixel": [1, 1]},
 {"source": [7.5, -500, 307.5], "center": [7.5, 500, 307.5], "u": [1, 0, 0], "v": [0, 0, 1], "rows": 4, "cols": 4, "pixel": [1, 1]}]}`
	if err := os.WriteFile(p("g.json"), []byte(geo), 0o644); err != nil {
		t.Fatal(err)
	}
	geoArgs := []string{"drr", "--quiet", "--volume", p("cube.npy"), "--geometry", p("g.json")}
	_, se, code = run(t, geoArgs...)
	if want := "tapeloop: warning: 1 of 2 poses: every ray missed the volume (pose 1: its central ray passes 300 mm from the volume's centre)"; code != 0 || !strings.Contains(se, want) {
		t.Errorf("a pose that misses: exit %d, stderr %q; want 0 and %q", code, se, want)
	}
	if _, se, code = run(t, append(geoArgs, "--strict", "--out", p("missed"))...); code != 1 || !strings.Contains(se, "--strict: 1 of 2 poses: every ray missed the volume (pose 1") {
		t.Errorf("a pose that misses, --strict: exit %d, stderr %q", code, se)
	}
	if _, err := os.Stat(p("missed/drr.npy")); err == nil {
		t.Error("--strict refused the run, but drr.npy was written")
	}
	// Rays through the volume's box that meet only zeros have not missed
	// it: a 16³ volume of ones in its middle 8³, pose 0 through the ones,
	// pose 1 through a corner of zeros. --strict runs; a run of pose 1
	// alone warns, after it, that every image is 0.
	inner := make([]float64, 16*16*16)
	for x := 4; x < 12; x++ {
		for y := 4; y < 12; y++ {
			for z := 4; z < 12; z++ {
				inner[(x*16+y)*16+z] = 1
			}
		}
	}
	writeNpy(t, p("inner.npy"), []int{16, 16, 16}, inner)
	through := `{"source": [7.5, -500, 7.5], "center": [7.5, 500, 7.5], "u": [1, 0, 0], "v": [0, 0, 1], "rows": 3, "cols": 3, "pixel": [1, 1]}`
	corner := `{"source": [1, -500, 1], "center": [1, 500, 1], "u": [1, 0, 0], "v": [0, 0, 1], "rows": 3, "cols": 3, "pixel": [1, 1]}`
	os.WriteFile(p("air2.json"), []byte(`{"poses": [`+through+`, `+corner+`]}`), 0o644)
	os.WriteFile(p("air1.json"), []byte(`{"poses": [`+corner+`]}`), 0o644)
	if _, se, code := run(t, "drr", "--quiet", "--volume", p("inner.npy"), "--geometry", p("air2.json"), "--strict", "--out", p("air2")); code != 0 || strings.Contains(se, "warning") {
		t.Errorf("a pose through zeros inside the box, --strict: exit %d, stderr %q; want 0 and no warning", code, se)
	}
	_, se, code = run(t, "drr", "--quiet", "--volume", p("inner.npy"), "--geometry", p("air1.json"), "--strict", "--out", p("air1"))
	if want := "tapeloop: warning: every image is 0: the rays cross the volume's box but meet only voxels of 0"; code != 0 || !strings.Contains(se, want) || strings.Contains(se, "missed") {
		t.Errorf("one pose through zeros inside the box: exit %d, stderr %q; want 0 and %q", code, se, want)
	}
}

// ones is n ones.
func ones(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = 1
	}
	return x
}

// TestDRRStepAgainstVolume: a trilinear step longer than the largest
// voxel is a warning; one so long that a pose's samples lie further apart
// than the volume is across (so that no ray takes two samples in it) is
// refused, with nothing written. The volume: 10³ voxels of 2 mm, 34.6 mm
// across its diagonal; one pose with its detector 1000 mm from the
// source, whose rays are at most 1.000001 times that long, so its samples
// lie 0.999999·step apart or more.
func TestDRRStepAgainstVolume(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	vol := make([]float64, 1000)
	for i := range vol {
		vol[i] = 0.01 + 0.001*float64(i%7)
	}
	writeNpy(t, p("v.npy"), []int{10, 10, 10}, vol)
	pose := `{"poses": [{"source": [9, -491, 9], "center": [9, 509, 9], "u": [1, 0, 0], "v": [0, 0, 1], "rows": 3, "cols": 3, "pixel": [1, 1]}]}`
	os.WriteFile(p("g.json"), []byte(pose), 0o644)
	base := []string{"drr", "--quiet", "--volume", p("v.npy"), "--spacing", "2,2,2", "--geometry", p("g.json"), "--method", "trilinear"}
	const warned = "longer than the largest voxel size (2 mm)"
	for _, c := range []struct {
		step   string
		code   int
		stderr string // "": no step warning
	}{
		{"1", 0, ""},
		{"2", 0, ""},
		{"2.5", 0, warned},
		{"34", 0, warned},
		{"34.7", 1, "--step 34.7 mm: pose 0's samples lie at least 34.7 mm apart, more than the volume is across (34.64 mm), so no ray takes two samples in it"},
		{"500", 1, "so no ray takes two samples in it: use a step near the voxel size (by default half the smallest, 1 mm)"},
	} {
		out := p("out" + c.step)
		_, se, code := run(t, append(base, "--step", c.step, "--out", out)...)
		switch {
		case code != c.code:
			t.Errorf("--step %s: exit %d (stderr %q), want %d", c.step, code, se, c.code)
		case c.stderr == "" && strings.Contains(se, "--step"):
			t.Errorf("--step %s: stderr %q, want no word of the step", c.step, se)
		case c.stderr != "" && !strings.Contains(se, c.stderr):
			t.Errorf("--step %s: stderr %q, want %q", c.step, se, c.stderr)
		}
		_, err := os.Stat(filepath.Join(out, "drr.npy"))
		if c.code == 0 && err != nil {
			t.Errorf("--step %s: no images written: %v", c.step, err)
		}
		if c.code != 0 && !os.IsNotExist(err) {
			t.Errorf("--step %s: refused, yet drr.npy is there (%v)", c.step, err)
		}
	}
}

// TestDRRGeometryFile: a run writes geometry.json beside drr.npy, every pose
// with its projection matrix; the merge of its shards writes the same
// file; read back with --geometry it renders the same images, and with
// another --frame it is refused.
func TestDRRGeometryFile(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	base := []string{"drr", "--quiet", "--size", "24", "--orbit", "5", "--detector", "9x7"}
	mustRun := func(args ...string) {
		t.Helper()
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, se)
		}
	}
	mustRun(append(base, "--out", p("whole"))...)
	for i := range 2 {
		mustRun(append(base, "--shard", fmt.Sprintf("%d/2", i), "--out", p(fmt.Sprintf("s%d.npz", i)))...)
	}
	mustRun("merge", "--out", p("merged"), p("s1.npz"), p("s0.npz"))
	mustRun("drr", "--quiet", "--size", "24", "--geometry", p("whole/geometry.json"), "--out", p("again"))
	g, err := os.ReadFile(p("whole/geometry.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Frame string
		Poses []struct {
			Rows, Cols int
			Matrix     [3][4]float64
		}
	}
	if err := json.Unmarshal(g, &doc); err != nil || doc.Frame != "lps" || len(doc.Poses) != 5 || doc.Poses[0].Rows != 9 || doc.Poses[0].Matrix[2] == [4]float64{} {
		t.Fatalf("geometry.json: %v, %+v", err, doc)
	}
	for _, f := range []string{"merged/geometry.json", "merged/drr.npy", "again/drr.npy"} {
		want, _ := os.ReadFile(p("whole/" + filepath.Base(f)))
		if got, _ := os.ReadFile(p(f)); len(want) == 0 || !bytes.Equal(got, want) {
			t.Errorf("%s differs from the run's", f)
		}
	}
	_, se, code := run(t, "drr", "--quiet", "--size", "24", "--geometry", p("whole/geometry.json"), "--frame", "ras")
	if code != 1 || !strings.Contains(se, "its poses are in the lps frame, --frame is ras") {
		t.Errorf("another frame: exit %d, stderr %q", code, se)
	}
}

// TestDRRRawOrder: a raw volume written x fastest (Fortran order, as
// InVesalius' matrix.dat) read with --order xyz renders what the same
// volume as .npy renders, byte for byte; read as the default zyx it does
// not. --order without a raw volume, or with another value, is refused.
func TestDRRRawOrder(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	const nx, ny, nz = 13, 10, 7
	vals := make([]float64, nx*ny*nz) // C order: (x·ny + y)·nz + z
	raw := make([]byte, 0, 2*len(vals))
	for i := range vals {
		vals[i] = float64((i*7919)%601 - 300)
	}
	for z := range nz { // x fastest
		for y := range ny {
			for x := range nx {
				u := uint16(int16(vals[(x*ny+y)*nz+z]))
				raw = append(raw, byte(u), byte(u>>8)) // little endian
			}
		}
	}
	writeNpy(t, p("v.npy"), []int{nx, ny, nz}, vals)
	if err := os.WriteFile(p("v.raw"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"drr", "--quiet", "--orbit", "3", "--detector", "8x9", "--pixel", "3"}
	rawArgs := []string{"--volume", p("v.raw"), "--shape", "13,10,7", "--dtype", "int16"}
	for _, c := range [][]string{
		{"--volume", p("v.npy"), "--out", p("npy")},
		append(append([]string{}, rawArgs...), "--order", "xyz", "--out", p("xyz")),
		append(append([]string{}, rawArgs...), "--out", p("zyx")),
	} {
		if _, se, code := run(t, append(append([]string{}, base...), c...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c, code, se)
		}
	}
	want, _ := os.ReadFile(p("npy/drr.npy"))
	if got, _ := os.ReadFile(p("xyz/drr.npy")); len(want) == 0 || !bytes.Equal(got, want) {
		t.Error("--order xyz: the images differ from the .npy volume's")
	}
	if got, _ := os.ReadFile(p("zyx/drr.npy")); bytes.Equal(got, want) {
		t.Error("the x-fastest file read as zyx renders the .npy volume's images: the test cannot tell the orders apart")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(append([]string{}, rawArgs...), "--order", "yxz"), `--order "yxz": want zyx`},
		{[]string{"--volume", p("v.npy"), "--order", "xyz"}, "--order: it is for a raw --volume"},
		{[]string{"--volume", p("v.npy"), "--shape", "5,6,7", "--dtype", "float32"}, "--shape and --dtype are for a raw volume; a .npy file gives its own"},
		{[]string{"--volume", p("v.npy"), "--dtype", "uint16"}, "--shape and --dtype are for a raw volume"},
		{[]string{"--order", "xyz"}, "--order describes a --volume file, and there is none"},
	} {
		_, se, code := run(t, append(append([]string{}, base...), c.args...)...)
		if code != 1 || !strings.Contains(se, c.want) || strings.Count(se, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, se, c.want)
		}
	}
}

// TestDRRPNGScale: --png-scale global maps every image over the run's
// smallest to largest line integral, --window W --level L over [L − W/2,
// L + W/2] with clipping: each PNG's gray against drr.npy's values through
// that map; the merge of shards writes the same PNGs.
func TestDRRPNGScale(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	base := []string{"drr", "--quiet", "--size", "28", "--orbit", "4", "--detector", "11x13", "--png"}
	for _, c := range []struct {
		name  string
		args  []string
		shard bool
	}{
		{"global", []string{"--png-scale", "global"}, true},
		{"window", []string{"--window", "0.5", "--level", "0.4"}, true},
	} {
		args := append(append(slices.Clip(base), c.args...), "--out", p(c.name))
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, se)
		}
		_, vals, err := npy.ReadAll64(p(c.name + "/drr.npy"))
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := 0.4-0.25, 0.4+0.25
		if c.name == "global" {
			lo, hi = slices.Min(vals), slices.Max(vals)
		}
		per := 11 * 13
		clipped := 0
		for i := range 4 {
			f, err := os.Open(p(fmt.Sprintf("%s/drr_%04d.png", c.name, i)))
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			g := img.(*image.Gray16)
			for k := range per {
				v := float64(float32(vals[i*per+k]))
				want := math.Round(float64((float32(v) - float32(lo)) * (65535 / (float32(hi) - float32(lo)))))
				want = min(max(want, 0), 65535)
				if want == 0 || want == 65535 {
					clipped++
				}
				if got := float64(g.Gray16At(k%13, k/13).Y); math.Abs(got-want) > 1 {
					t.Fatalf("%s: pose %d pixel %d: gray %v, want %v for %v over [%v, %v]", c.name, i, k, got, want, v, lo, hi)
				}
			}
		}
		if c.name == "window" && clipped == 0 {
			t.Errorf("window: no pixel clipped: the window does not test clipping")
		}
		if c.shard {
			var shards []string
			for i := range 2 {
				shards = append(shards, p(fmt.Sprintf("%s-%d.npz", c.name, i)))
				sargs := append(append(slices.Clip(base), c.args...), "--shard", fmt.Sprintf("%d/2", i), "--out", shards[i])
				if _, se, code := run(t, sargs...); code != 0 {
					t.Fatalf("%s shard %d: exit %d: %s", c.name, i, code, se)
				}
			}
			if _, se, code := run(t, "merge", "--out", p(c.name+"-merged"), shards[1], shards[0]); code != 0 {
				t.Fatalf("%s: merge: exit %d: %s", c.name, code, se)
			}
			for i := range 4 {
				n := fmt.Sprintf("drr_%04d.png", i)
				want, _ := os.ReadFile(p(c.name + "/" + n))
				if got, _ := os.ReadFile(p(c.name + "-merged/" + n)); len(want) == 0 || !bytes.Equal(got, want) {
					t.Errorf("%s: merged %s differs from the run's", c.name, n)
				}
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--png-scale", "local"}, `--png-scale "local": want image or global`},
		{[]string{"--window", "1"}, "--window and --level: give both"},
		{[]string{"--window", "0", "--level", "1"}, "want a positive, finite window"},
		{[]string{"--window", "1", "--level", "1", "--png-scale", "global"}, "--window and --png-scale global: give one"},
	} {
		_, se, code := run(t, append(append(slices.Clip(base), c.args...), "--out", p("bad"))...)
		if code != 1 || !strings.Contains(se, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, se, c.want)
		}
	}
}

// TestDRROrbitAxis: an orbit about x of a volume renders what an orbit
// about z renders of the same volume turned so that x goes to z (its axes
// cycled: B[j, k, i] = A[i, j, k]), from the same start; an orbit about z
// through the volume's centre from 0° is the default orbit, byte for byte;
// and the poses of geometry.json lie where --isocenter, --start and --axis
// put them.
func TestDRROrbitAxis(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	const n = 12
	a := make([]float64, n*n*n)
	b := make([]float64, n*n*n)
	for i := range n {
		for j := range n {
			for k := range n {
				v := float64((i*131+j*37+k*11)%17) / 17
				a[(i*n+j)*n+k] = v
				b[(j*n+k)*n+i] = v
			}
		}
	}
	writeNpy(t, p("a.npy"), []int{n, n, n}, a)
	writeNpy(t, p("b.npy"), []int{n, n, n}, b)
	orbit := []string{"drr", "--quiet", "--orbit", "5", "--detector", "9x11", "--pixel", "2", "--start", "17"}
	mustRun := func(args ...string) {
		t.Helper()
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, se)
		}
	}
	mustRun(append(slices.Clip(orbit), "--volume", p("a.npy"), "--axis", "x", "--out", p("ax"))...)
	mustRun(append(slices.Clip(orbit), "--volume", p("b.npy"), "--out", p("bz"))...)
	_, x, err := npy.ReadAll64(p("ax/drr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	_, z, _ := npy.ReadAll64(p("bz/drr.npy"))
	if len(x) != 5*9*11 || len(z) != len(x) || normRel(x, z) > 1e-5 {
		t.Errorf("about x of A and about z of A turned: %d and %d values, relative difference %.3g", len(x), len(z), normRel(x, z))
	}
	// Through the centre, about z, from 0°: the default orbit.
	mustRun("drr", "--quiet", "--volume", p("a.npy"), "--orbit", "5", "--detector", "9x11", "--out", p("d"))
	mustRun("drr", "--quiet", "--volume", p("a.npy"), "--orbit", "5", "--detector", "9x11", "--isocenter", "5.5,5.5,5.5", "--axis", "0,0,1", "--start", "0", "--out", p("e"))
	for _, f := range []string{"drr.npy", "geometry.json"} {
		d, _ := os.ReadFile(p("d/" + f))
		if e, _ := os.ReadFile(p("e/" + f)); len(d) == 0 || !bytes.Equal(d, e) {
			t.Errorf("the default orbit spelled out: %s differs", f)
		}
	}
	// The poses about y through (1, 2, 3), from 90°: about y, 0° puts the
	// source on +z, 90° on +x.
	mustRun("drr", "--quiet", "--volume", p("a.npy"), "--orbit", "4", "--detector", "3x3", "--sid", "100", "--sdd", "160",
		"--isocenter", "1,2,3", "--axis", "y", "--start", "90", "--out", p("y"))
	g, _ := os.ReadFile(p("y/geometry.json"))
	var doc struct{ Poses []ops.Pose }
	if err := json.Unmarshal(g, &doc); err != nil || len(doc.Poses) != 4 {
		t.Fatalf("geometry.json: %v", err)
	}
	iso := [3]float64{1, 2, 3}
	wantSrc := [][3]float64{{101, 2, 3}, {1, 2, -97}, {-99, 2, 3}, {1, 2, 103}}
	for k, q := range doc.Poses {
		for c := range 3 {
			if math.Abs(q.Source[c]-wantSrc[k][c]) > 1e-9 || math.Abs((q.Center[c]-iso[c])+0.6*(q.Source[c]-iso[c])) > 1e-9 {
				t.Fatalf("pose %d: source %v, detector centre %v; want the source at %v and the detector 60 mm beyond the isocentre", k, q.Source, q.Center, wantSrc[k])
			}
		}
		if q.V != [3]float64{0, -1, 0} {
			t.Errorf("pose %d: v %v, want −y", k, q.V)
		}
	}
}

// TestDRRReusedOutDirHoldsThisRun: a run into the --out of an earlier one
// with more poses and other formats leaves that directory holding this
// run's files only, of those named as a DRR run names its outputs: no
// earlier PNG past its poses, no earlier stack of another format; a
// user's own files, and names merely like the outputs', stay.
func TestDRRReusedOutDirHoldsThisRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	base := []string{"drr", "--quiet", "--size", "16", "--detector", "9x7", "--out", dir}
	if _, se, code := run(t, append(base, "--orbit", "5", "--png", "--format", "npy,tiff,mha")...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, se)
	}
	mine := []string{"notes.txt", "drr_12.png", "drr_00a1.png", "drr.raw"}
	for _, n := range mine {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, se, code := run(t, append(base, "--orbit", "3", "--png")...); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, se)
	}
	var got []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := append([]string{"drr.npy", "drr_0000.png", "drr_0001.png", "drr_0002.png", "geometry.json"}, mine...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the directory holds %q, want %q", got, want)
	}
	h, _, err := npy.ReadAll64(filepath.Join(dir, "drr.npy"))
	if err != nil || len(h.Shape) != 3 || h.Shape[0] != 3 {
		t.Errorf("drr.npy: %v, %v", h.Shape, err)
	}
}
