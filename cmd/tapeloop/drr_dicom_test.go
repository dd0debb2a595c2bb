package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/testutil"
)

// TestDRRDICOMSeries renders a DICOM series picked with --series from a
// directory holding two.
func TestDRRDICOMSeries(t *testing.T) {
	dir := t.TempDir()
	for n, uid := range []string{"1.2.826.0.1.3680043.8.498.31", "1.2.826.0.1.3680043.8.498.32"} {
		for k := range 6 {
			s := testutil.DICOMSlice{Series: uid, Description: fmt.Sprint("series ", n), Instance: k + 1,
				IPP: [3]float64{-8, -8, 2 * float64(k)}, IOP: [6]float64{1, 0, 0, 0, 1, 0}, PixelSpacing: [2]float64{2, 2},
				Rows: 8, Cols: 8, Signed: true, Slope: 1, Intercept: -1000}
			s.Pixels = make([]int16, 64)
			for i := range s.Pixels {
				s.Pixels[i] = 1000 // water
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("im%d_%d", n, 5-k)), testutil.DICOMFile(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.WriteFile(filepath.Join(dir, "README"), []byte("not DICOM"), 0o644)
	args := []string{"drr", "--quiet", "--volume", dir, "--hu", "--orbit", "2", "--detector", "4x4", "--pixel", "2"}
	_, stderr, code := run(t, args...)
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") > 0 || !strings.Contains(stderr, "--series") ||
		!strings.Contains(stderr, `1.2.826.0.1.3680043.8.498.32 "series 1" (6 slices)`) {
		t.Fatalf("two series without --series: exit %d, stderr %q", code, stderr)
	}
	stdout, stderr, code := run(t, append(args, "--series", "1.2.826.0.1.3680043.8.498.32")...)
	if code != 0 || !strings.Contains(stdout, "drr: 2 poses of 4x4") || strings.Contains(stdout, "sum of line integrals 0,") {
		t.Fatalf("--series: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	_, stderr, code = run(t, "drr", "--quiet", "--series", "1.2.3")
	if code != 1 || !strings.Contains(stderr, "--series 1.2.3") {
		t.Errorf("--series without --volume: exit %d, stderr %q", code, stderr)
	}
}

// TestWaveletDICOMSeries: the wavelet reads a DICOM series as the volume
// whose axes are its columns, rows and slices (in position order, the
// files named out of it), its values after the rescale: the same CSV, byte
// for byte, as that array given as .npy. --series picks one of two series.
func TestWaveletDICOMSeries(t *testing.T) {
	dir := t.TempDir()
	series := filepath.Join(dir, "ct")
	os.Mkdir(series, 0o755)
	const cols, rows, nslice = 7, 5, 6
	rng := rand.New(rand.NewPCG(3, 4))
	want := make([]float64, cols*rows*nslice)
	for n, uid := range []string{"1.2.826.0.1.3680043.8.498.41", "1.2.826.0.1.3680043.8.498.42"} {
		for k := range nslice {
			s := testutil.DICOMSlice{Series: uid, Instance: k + 1,
				IPP: [3]float64{-8, -6, 2.5 * float64(k)}, IOP: [6]float64{1, 0, 0, 0, 1, 0}, PixelSpacing: [2]float64{1.5, 2},
				Rows: rows, Cols: cols, Signed: true, Slope: 1, Intercept: -1024}
			s.Pixels = make([]int16, rows*cols)
			for r := range rows {
				for c := range cols {
					px := int16(rng.IntN(3000))
					s.Pixels[r*cols+c] = px
					if n == 1 {
						want[(c*rows+r)*nslice+k] = float64(px) - 1024
					}
				}
			}
			if err := os.WriteFile(filepath.Join(series, fmt.Sprintf("s%d_%d.dcm", n, nslice-k)), testutil.DICOMFile(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	npyPath := filepath.Join(dir, "v.npy")
	writeNpy(t, npyPath, []int{cols, rows, nslice}, want)
	args := []string{"wavelet", "-q", "--theta", "0,pi/3", "--phi", "pi/4", "--xi", "1,2.5"}
	a, b := filepath.Join(dir, "dicom.csv"), filepath.Join(dir, "npy.csv")
	if _, se, code := run(t, append(args, "--volume", series, "--series", "1.2.826.0.1.3680043.8.498.42", "--out", a)...); code != 0 {
		t.Fatalf("DICOM: exit %d: %s", code, se)
	}
	if _, se, code := run(t, append(args, "--volume", npyPath, "--out", b)...); code != 0 {
		t.Fatalf("npy: exit %d: %s", code, se)
	}
	if x, y := readLines(t, a), readLines(t, b); !slices.Equal(x, y) {
		t.Errorf("the series' CSV\n%s\ndiffers from the array's\n%s", strings.Join(x, "\n"), strings.Join(y, "\n"))
	}
	if _, se, code := run(t, append(args, "--volume", series, "--out", a)...); code != 1 || !strings.Contains(se, "--series") {
		t.Errorf("two series without --series: exit %d, stderr %q", code, se)
	}
	if _, se, code := run(t, append(args, "--series", "1.2.3")...); code != 1 || !strings.Contains(se, "--series 1.2.3") {
		t.Errorf("--series without --volume: exit %d, stderr %q", code, se)
	}
}
