package main

import (
	bin "encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The limits of the users' formulas and of grid and voxel spacings, as a
// user meets them on the command line: long formulas run, and run right;
// what cannot run is refused with one line and exit status 1.

// limitImages writes n images of 4×4 values and returns the file and the
// images.
func limitImages(t *testing.T, dir string, n int) (string, [][]float64) {
	t.Helper()
	data := make([]float64, n*16)
	imgs := make([][]float64, n)
	for i := range data {
		data[i] = float64((i*5)%11) / 8
	}
	for i := range imgs {
		imgs[i] = data[i*16 : (i+1)*16]
	}
	p := filepath.Join(dir, "im.npy")
	writeNpy(t, p, []int{n, 4, 4}, data)
	return p, imgs
}

// affinityTotal reads the sum of all affinities from the result line.
func affinityTotal(t *testing.T, stdout string) float64 {
	t.Helper()
	const key = "sum of all affinities "
	i := strings.LastIndex(stdout, key)
	if i < 0 {
		t.Fatalf("no %q in %.300q", key, stdout)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(stdout[i+len(key):]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// oneLine checks a refusal: exit status 1, nothing on standard output,
// one line "tapeloop: …" holding want on standard error.
func oneLine(t *testing.T, stdout, stderr string, code int, want string) {
	t.Helper()
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "tapeloop: ") || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, want) {
		t.Errorf("exit %d, stdout %.200q, stderr %.400q; want exit 1 and one line with %q", code, stdout, stderr, want)
	}
}

// TestFormulaLimitsLong: a formula as long as an argument can be (about
// 120 KB) compiles and runs, and gives what the closed form
// gives: k identical terms are k times the term.
func TestFormulaLimitsLong(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	images, imgs := limitImages(t, dir, n)
	var total, sq float64 // Σ over pairs of Σa, and of Σ(a−b)²
	for i := range imgs {
		for j := range imgs {
			for k := range imgs[i] {
				d := imgs[i][k] - imgs[j][k]
				total += imgs[i][k]
				sq += d * d
			}
		}
	}
	for _, c := range []struct {
		name    string
		formula string
		want    float64
		tol     float64
		extra   []string
	}{
		{"sum of 60,000 terms", "sum(" + strings.Repeat("a+", 59_999) + "a)", 60_000 * total, 1e-5, nil},
		{"sum of 60,000 terms, direct", "sum(" + strings.Repeat("a+", 59_999) + "a)", 60_000 * total, 1e-2, []string{"--method", "direct"}},
		{"9,000 reductions", strings.Repeat("sum((a-b)^2)+", 8_999) + "sum((a-b)^2)", 9_000 * sq, 1e-5, nil},
		{"a product of 10,000 factors", "sum(a*b)*0+sum(a" + strings.Repeat("*1.0001", 10_000) + ")", total * math.Pow(1.0001, 10_000), 1e-3, nil}, // float32: 10,000 roundings
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.formula) > 128<<10 {
				t.Fatalf("%d bytes: too long for one argument", len(c.formula))
			}
			// That the work grows linearly with the formula's length is
			// counted in internal/formula (TestFormulaLong);
			// here a run that never ends fails as hung.
			args := append([]string{"affinity", "--quiet", "--images", images, "--formula", c.formula}, c.extra...)
			stdout, stderr, code := runOrHang(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %.500s", code, stderr)
			}
			if got := affinityTotal(t, stdout); math.Abs(got-c.want) > c.tol*math.Abs(c.want) {
				t.Errorf("sum of all affinities %v, want %v", got, c.want)
			}
		})
	}
}

// TestFormulaLimitsRefused: nesting too deep, and a long formula with a
// mistake, each one short line.
func TestFormulaLimitsRefused(t *testing.T) {
	small := []string{"affinity", "--quiet", "-n", "8", "--height", "4", "--width", "4", "--formula"}
	for _, c := range []struct{ name, formula, want string }{
		{"parentheses", "sum(" + strings.Repeat("(", 60_000) + "a" + strings.Repeat(")", 60_000) + ")", "column 1004: nested too deeply"},
		{"signs", "sum(" + strings.Repeat("-(", 30_000) + "a" + strings.Repeat(")", 30_000) + ")", "nested too deeply"},
		{"calls", strings.Repeat("exp(", 20_000) + "sum(a)" + strings.Repeat(")", 20_000), "nested too deeply"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runOrHang(t, append(small, c.formula)...)
			oneLine(t, stdout, stderr, code, c.want)
			if len(stderr) > 400 {
				t.Errorf("a line of %d bytes: the formula is not shortened", len(stderr))
			}
		})
	}
	// A mistake in a long formula: quoted around its column.
	f := "sum(" + strings.Repeat("a+", 1000) + "@+" + strings.Repeat("a+", 1000) + "a)"
	_, stderr, code := run(t, append(small, f)...)
	want := `tapeloop: --formula "…` + strings.Repeat("a+", 30) + "@+" + strings.Repeat("a+", 29) + `…": column 2005: illegal character U+0040 '@'` + "\n"
	if code != 1 || stderr != want {
		t.Errorf("exit %d, stderr\n%s\nwant\n%s", code, stderr, want)
	}
	// A short one: whole, as ever.
	_, stderr, code = run(t, append(small, "sum(a+@)")...)
	if want := "tapeloop: --formula \"sum(a+@)\": column 7: illegal character U+0040 '@'\n"; code != 1 || stderr != want {
		t.Errorf("exit %d, stderr %q, want %q", code, stderr, want)
	}
}

// TestFormulaLimitsSpacing: a grid or voxel spacing that is subnormal, or
// so large that its reciprocal or the extent is not a normal number, is
// refused by name instead of giving NaN.
func TestFormulaLimitsSpacing(t *testing.T) {
	for _, c := range []struct{ dx, want string }{
		{"1e-310", "--dx 1e-310: too small"},
		{"5e-324", "--dx 5e-324: too small"},
		{"1e308", "--dx 1e+308: too large"},
		{"1e307", "--dx 1e+307: the grid's last point"},
		{"1e-40", "--dx 1e-40: too small for float32 queries"},
		{"1e36", "--a 0, --dx 1e+36: the grid's end"},
	} {
		t.Run("dx "+c.dx, func(t *testing.T) {
			stdout, stderr, code := run(t, "interp", "--quiet", "--points", "100", "--dx", c.dx)
			oneLine(t, stdout, stderr, code, c.want)
		})
	}
	// The same grids in float64 where float32 was the limit: the result of
	// the spacing 1e-3, scaled grid and queries alike.
	ref, _, code := run(t, "interp", "--quiet", "--points", "1000", "--dtype", "float64", "--dx", "1e-3")
	if code != 0 {
		t.Fatal(ref)
	}
	for _, dx := range []string{"1e-40", "1e36", "1e-300"} {
		stdout, stderr, code := run(t, "interp", "--quiet", "--points", "1000", "--dtype", "float64", "--dx", dx)
		if code != 0 || resultValue(t, stdout) != resultValue(t, ref) && math.Abs(resultValue(t, stdout)/resultValue(t, ref)-1) > 1e-12 {
			t.Errorf("--dx %s: exit %d, %s%s; want %s", dx, code, stdout, stderr, ref)
		}
	}

	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	data := make([]byte, 4*3*2*2)
	for i := range data {
		data[i] = byte(i)
	}
	// A MetaImage header's spacing, read as a float64.
	mha := "ObjectType = Image\nNDims = 3\nDimSize = 4 3 2\nElementType = MET_SHORT\nElementSpacing = 1e-310 1 1\nElementDataFile = LOCAL\n"
	if err := os.WriteFile(p("v.mha"), append([]byte(mha), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	// NIfTI-1 spacings are float32: the smallest, subnormal, ones in
	// micrometres are far below any voxel, but normal float64 numbers;
	// 1e-310 cannot be written there. A pixdim of 1e-44 mm with the unit
	// micrometres is 1e-47 mm.
	if err := os.WriteFile(p("v.nii"), limitNIfTI(1e-44, data), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"metaimage 1e-310", []string{"drr", "--quiet", "--orbit", "1", "--detector", "4x4", "--volume", p("v.mha")}, "1e-310 is too small"},
		{"--spacing 1e-310", []string{"drr", "--quiet", "--size", "8", "--orbit", "1", "--detector", "4x4", "--spacing", "1e-310,1,1"}, "1e-310 is too small"},
		{"--spacing 5e-324", []string{"drr", "--quiet", "--size", "8", "--orbit", "1", "--detector", "4x4", "--spacing", "1,5e-324,1"}, "5e-324 is too small"},
		{"--spacing 1e308", []string{"drr", "--quiet", "--size", "8", "--orbit", "1", "--detector", "4x4", "--spacing", "1,1,1e308"}, "1e+308 is too large"},
		{"--spacing 1e307 over 64 voxels", []string{"drr", "--quiet", "--size", "64", "--orbit", "1", "--detector", "4x4", "--spacing", "1e307,1,1"}, "extent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := run(t, c.args...)
			oneLine(t, stdout, stderr, code, c.want)
		})
	}
	t.Run("nifti subnormal pixdim", func(t *testing.T) {
		stdout, stderr, code := run(t, "drr", "--quiet", "--orbit", "1", "--detector", "4x4", "--volume", p("v.nii"))
		if code == 0 && strings.Contains(strings.ToLower(stdout), "nan") {
			t.Errorf("NaN with exit 0: %s", stdout)
		}
		if code != 0 && (strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "tapeloop: ")) {
			t.Errorf("exit %d: %q, want one line", code, stderr)
		}
	})
}

// resultValue is the number that ends a result line.
func resultValue(t *testing.T, stdout string) float64 {
	t.Helper()
	f := strings.Fields(stdout)
	if len(f) == 0 {
		t.Fatalf("no result in %q", stdout)
	}
	v, err := strconv.ParseFloat(f[len(f)-1], 64)
	if err != nil {
		t.Fatalf("no result in %q", stdout)
	}
	return v
}

// limitNIfTI is a NIfTI-1 file of a 4×3×2 int16 volume with spacing s
// along the first axis, in micrometres.
func limitNIfTI(s float32, data []byte) []byte {
	b := make([]byte, 352)
	o := bin.LittleEndian
	o.PutUint32(b[0:], 348)
	for i, d := range []int16{3, 4, 3, 2, 1, 1, 1, 1} {
		o.PutUint16(b[40+2*i:], uint16(d))
	}
	o.PutUint16(b[70:], 4)  // int16
	o.PutUint16(b[72:], 16) // bits
	for i, p := range []float32{1, s, 1, 1} {
		o.PutUint32(b[76+4*i:], math.Float32bits(p))
	}
	o.PutUint32(b[108:], math.Float32bits(352))
	o.PutUint32(b[112:], math.Float32bits(1))
	b[123] = 3 // xyzt_units: micrometres
	copy(b[344:], "n+1")
	return append(b, data...)
}
