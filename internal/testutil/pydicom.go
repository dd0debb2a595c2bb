package testutil

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// PyDICOMSeries is one series for internal/volume/testdata/dicom_series.py,
// which writes DICOM CT series with pydicom; its docstring says what each
// field means.
type PyDICOMSeries struct {
	Dir        string         `json:"dir"`
	UID        string         `json:"uid"`
	Desc       string         `json:"desc"`
	Syntax     string         `json:"syntax"`
	Rows       int            `json:"rows"`
	Cols       int            `json:"cols"`
	PS         []string       `json:"ps"`
	IOP        []string       `json:"iop"`
	IPPs       [][3]string    `json:"ipps"`
	Signed     bool           `json:"signed"`
	BitsStored int            `json:"bits_stored"`
	Slope      string         `json:"slope"`
	Intercept  string         `json:"intercept"`
	Seed       int            `json:"seed"`
	Sequence   bool           `json:"sequence"`
	Expect     *PyDICOMExpect `json:"expect"`
	// Instances are the slices' InstanceNumbers; nil: shuffled.
	Instances []int `json:"instances,omitempty"`
	// Cube replaces the random pixels; nil: random.
	Cube *PyDICOMCube `json:"cube,omitempty"`
}

// PyDICOMExpect asks dicom_series.py to read a series back with pydicom.
type PyDICOMExpect struct {
	Npy    string   `json:"npy"`
	JSON   string   `json:"json"`
	Voxels [][3]int `json:"voxels"`
}

// PyDICOMCube is a series' pixels: stored Value at column i, row j of the
// k-th slice along the normal for Lo ≤ (i, j, k) < Lo + Size, Background
// elsewhere.
type PyDICOMCube struct {
	Lo         [3]int `json:"lo"`
	Size       [3]int `json:"size"`
	Value      int    `json:"value"`
	Background int    `json:"background"`
}

// WritePyDICOM has pydicom write the series (and their expectations), or
// skips the test where python3 with numpy and pydicom is absent.
func WritePyDICOM(tb testing.TB, spec []PyDICOMSeries) {
	tb.Helper()
	py := Python(tb, "numpy", "pydicom")
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "volume", "testdata", "dicom_series.py")
	js, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	specPath := filepath.Join(tb.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, js, 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(py, script, specPath).CombinedOutput(); err != nil {
		tb.Fatalf("dicom_series.py: %v\n%s", err, out)
	}
}
