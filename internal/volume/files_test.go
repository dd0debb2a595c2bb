package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/testutil"
)

// writeSeries writes a DICOM series of n 2×3 slices into dir, im0.dcm …,
// and a file that is not DICOM.
func writeSeries(t *testing.T, dir string, n int) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range n {
		b := testutil.DICOMFile(testutil.DICOMSlice{Series: "1.2.3", Instance: k + 1, IPP: [3]float64{0, 0, float64(k)},
			IOP: [6]float64{1, 0, 0, 0, 1, 0}, PixelSpacing: [2]float64{1, 1}, Rows: 2, Cols: 3, Slope: 1, Signed: true,
			Pixels: []int16{1, 2, 3, 4, 5, 6}})
		p := filepath.Join(dir, fmt.Sprintf("im%d.dcm", k))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not DICOM"), 0o644); err != nil {
		t.Fatal(err)
	}
	return names
}

const metaHead = "ObjectType = Image\nNDims = 3\nDimSize = 2 3 4\nElementType = MET_UCHAR\n"

// TestFiles: the files Load reads besides the one named: a MetaImage's
// data file as Load resolves it, every DICOM file of a series' directory
// (named by the directory or one of its files); none for a file that
// holds its own data.
func TestFiles(t *testing.T) {
	root := t.TempDir()
	p := func(n string) string { return filepath.Join(root, n) }
	os.Mkdir(p("hdr"), 0o755)
	for name, text := range map[string]string{
		"hdr/rel.mhd":   metaHead + "ElementDataFile = ../v.raw\n",
		"hdr/abs.mhd":   metaHead + "ElementDataFile = " + p("v.raw") + "\n",
		"hdr/local.mha": metaHead + "ElementDataFile = LOCAL\n" + strings.Repeat("\x00", 24),
		"hdr/list.mhd":  metaHead + "ElementDataFile = LIST\na.raw\n",
		"hdr/list2.mhd": metaHead + "ElementDataFile = LIST 2D\na.raw\n",
	} {
		if err := os.WriteFile(p(name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	series := writeSeries(t, p("dcm"), 3)
	for _, c := range []struct {
		path   string
		series string
		want   []string
	}{
		{p("hdr/rel.mhd"), "", []string{p("v.raw")}},
		{p("hdr/abs.mhd"), "", []string{p("v.raw")}},
		{p("hdr/local.mha"), "", nil},
		{p("hdr/list.mhd"), "", nil},
		{p("hdr/list2.mhd"), "", nil},
		{p("hdr/missing.mhd"), "", nil},
		{p("dcm"), "", series},
		{p("dcm/im1.dcm"), "", series},
		{p("dcm"), "1.2.3", series},
		{"", "", nil},
	} {
		if got := Files(c.path, Options{Series: c.series}); !slices.Equal(got, c.want) {
			t.Errorf("Files(%s): %q, want %q", c.path, got, c.want)
		}
	}
}

// TestLoadRawFlagsRefusedForDICOM: --shape and --dtype, which describe a
// raw file, are refused for a DICOM series as for any file with a header.
func TestLoadRawFlagsRefusedForDICOM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dcm")
	series := writeSeries(t, dir, 3)
	if _, err := Load(dir, Options{}); err != nil {
		t.Fatalf("the series: %v", err)
	}
	for _, path := range []string{dir, series[0]} {
		for _, opt := range []Options{{Shape: [3]int{2, 3, 3}}, {Dtype: "int16"}, {Shape: [3]int{2, 3, 3}, Dtype: "int16"}} {
			_, err := Load(path, opt)
			if err == nil || !strings.Contains(err.Error(), "--shape and --dtype are for a raw volume; a DICOM series gives its own") {
				t.Errorf("Load(%s, shape %v, dtype %q): %v, want --shape and --dtype refused", path, opt.Shape, opt.Dtype, err)
			}
		}
	}
}

// TestMetaImageKeyTwice: a key the reader uses given twice is refused,
// naming it, rather than the last taken; a key it ignores may repeat.
func TestMetaImageKeyTwice(t *testing.T) {
	dir := t.TempDir()
	data := strings.Repeat("\x01", 24)
	for _, c := range []struct{ header, want string }{
		{metaHead + "DimSize = 4 3 2\nElementDataFile = LOCAL\n", "DimSize twice"},
		{metaHead + "ElementType = MET_SHORT\nElementDataFile = LOCAL\n", "ElementType twice"},
		{"Offset = 0 0 0\n" + metaHead + "Offset = 1 1 1\nElementDataFile = LOCAL\n", "Offset twice"},
		{"Comment = a\nComment = b\n" + metaHead + "ElementDataFile = LOCAL\n", ""},
	} {
		p := filepath.Join(dir, "v.mha")
		if err := os.WriteFile(p, []byte(c.header+data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p, Options{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.header, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), "MetaImage header gives "+c.want)):
			t.Errorf("%q: %v, want %q", c.header, err, c.want)
		}
	}
}
