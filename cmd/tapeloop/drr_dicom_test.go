package main

import (
	"fmt"
	"os"
	"path/filepath"
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
