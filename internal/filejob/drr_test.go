package filejob

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
	"github.com/tapeloop/tapeloop/ops"
	"gorgonia.org/tensor"
)

// TestDRRSpecValidate checks the spec's own fields, and that it checks
// its Config (drr.TestConfigValidate has the Config's cases).
func TestDRRSpecValidate(t *testing.T) {
	num := func(x float64) *float64 { return &x }
	cases := []struct {
		Name string
		Edit func(*DRRSpec)
		Want string // "": valid
	}{
		{"default", func(*DRRSpec) {}, ""},
		{"spacing and origin", func(s *DRRSpec) { s.Spacing, s.Origin = &[3]float64{1, 2, 3}, &[3]float64{-1, 0, 1e3} }, ""},
		{"spacing NaN", func(s *DRRSpec) { s.Spacing = &[3]float64{1, math.NaN(), 1} }, "--spacing 1,NaN,1: NaN is not a finite number"},
		{"mu-water 0", func(s *DRRSpec) { s.MuWater = num(0) }, "--mu-water 0: must be positive"},
		{"size 1", func(s *DRRSpec) { s.Size = 1 }, "--size 1: want 2 to 1024"},
		{"size 1025", func(s *DRRSpec) { s.Size = 1025 }, "--size 1025: want 2 to 1024"},
		{"size ignored with a volume", func(s *DRRSpec) { s.Size, s.Volume = 0, "v.npy" }, ""},
		{"shape", func(s *DRRSpec) { s.Volume, s.RawShape = "v.raw", "4,5,6" }, ""},
		{"shape fraction", func(s *DRRSpec) { s.Volume, s.RawShape = "v.raw", "4,5.5,6" }, `--shape "4,5.5,6": want three positive integers`},
		{"shape zero", func(s *DRRSpec) { s.Volume, s.RawShape = "v.raw", "4,0,6" }, "want three positive integers"},
		{"shape syntax", func(s *DRRSpec) { s.Volume, s.RawShape = "v.raw", "4x5x6" }, `--shape "4x5x6": want three comma-separated numbers`},
		{"shape ignored without a volume", func(s *DRRSpec) { s.RawShape = "nonsense" }, ""},
		{"detector 0x5", func(s *DRRSpec) { s.Detector = "0x5" }, `--detector "0x5": want RxC`},
		{"detector spaced", func(s *DRRSpec) { s.Detector = "20x 30" }, `--detector "20x 30"`},
		{"detector trailing", func(s *DRRSpec) { s.Detector = "20x30x" }, `--detector "20x30x"`},
		{"detector ignored with a geometry", func(s *DRRSpec) { s.Detector, s.Geometry = "", "g.json" }, ""},
		{"orbit 0", func(s *DRRSpec) { s.Orbit = 0 }, "geometry: --orbit 0: need at least one pose"},
		{"sid beyond sdd", func(s *DRRSpec) { s.SID = 2000 }, "need 0 < sid < sdd, got sid 2000, sdd 1020"},
		{"sid 0", func(s *DRRSpec) { s.SID = 0 }, "need 0 < sid < sdd"},
		{"sdd NaN", func(s *DRRSpec) { s.SDD = math.NaN() }, "need 0 < sid < sdd"},
		{"pixel 0", func(s *DRRSpec) { s.Pixel = 0 }, "pose 0 has pixel size [0 0]; both must be positive"},
		{"pixel infinite", func(s *DRRSpec) { s.Pixel = math.Inf(1) }, "pose 0 has a NaN or infinite coordinate"},
		{"orbit ignored with a geometry", func(s *DRRSpec) { s.Orbit, s.Geometry = 0, "g.json" }, ""},
		{"method", func(s *DRRSpec) { s.Method = "joseph" }, `--method "joseph": want siddon or trilinear`},
		{"step 0", func(s *DRRSpec) { s.Method, s.Step = "trilinear", num(0) }, "--step 0: must be positive"},
		{"png without out", func(s *DRRSpec) { s.PNG = true }, "--png: needs --out DIR"},
		{"png with out", func(s *DRRSpec) { s.PNG, s.Out = true, "dir" }, ""},
		{"format", func(s *DRRSpec) { s.Format, s.Out = "tiff, MHA,npy", "dir" }, ""},
		{"format tif", func(s *DRRSpec) { s.Format, s.Out = "tif", "dir" }, ""},
		{"format without out", func(s *DRRSpec) { s.Format = "mha" }, "--format mha: needs --out DIR"},
		{"format unknown", func(s *DRRSpec) { s.Format, s.Out = "npy,nrrd", "dir" }, `--format "npy,nrrd": "nrrd" is not a format: want a comma-separated list of npy, mha and tiff`},
		{"format empty item", func(s *DRRSpec) { s.Format, s.Out = "npy,,mha", "dir" }, `"" is not a format`},
		{"format twice", func(s *DRRSpec) { s.Format, s.Out = "tiff,tif", "dir" }, `--format "tiff,tif": tiff is given twice`},
		{"format png", func(s *DRRSpec) { s.Format, s.Out = "png", "dir" }, "PNGs are --png"},
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			s := DefaultDRRSpec()
			c.Edit(&s)
			err := s.Validate()
			workloadtest.WantError(t, err, c.Want)
			if err != nil && strings.Contains(c.Want, "geometry:") && !errors.Is(err, ops.ErrGeometry) {
				t.Errorf("error %q does not wrap ops.ErrGeometry", err)
			}
		})
	}
}

// smallDRR is a quick case: the 24³ phantom over 5 poses of 12×10.
func smallDRR(out string) DRRSpec {
	s := DefaultDRRSpec()
	s.Size, s.Orbit, s.Detector, s.Pixel, s.Out = 24, 5, "12x10", 16, out
	return s
}

// A run's outputs appear on Commit only; Close before it removes them,
// and keeps only the checkpoint of the poses rendered (and the directories
// holding it), which the next run resumes from.
func TestOpenDRROutputs(t *testing.T) {
	dev, err := engine.CPU(0)
	if err != nil {
		t.Fatal(err)
	}
	dev = dev.Quiet()
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	s := smallDRR(dir)
	s.PNG = true
	task, err := OpenDRR(s, dev, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.WithBatch(2).Run(context.Background(), task.Job()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "drr.npy")); !os.IsNotExist(err) {
		t.Errorf("drr.npy before Commit: %v", err)
	}
	task.Close()
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "drr.npy.ckpt" {
		t.Errorf("left after Close: %v, want only the checkpoint drr.npy.ckpt", entries)
	}

	s.Resume = true
	task, err = OpenDRR(s, dev, true)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if _, err := dev.WithBatch(2).Run(context.Background(), task.Job()); err != nil {
		t.Fatal(err)
	}
	if err := task.Commit(); err != nil {
		t.Fatal(err)
	}
	task.Close()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "drr.npy drr_0000.png drr_0001.png drr_0002.png drr_0003.png drr_0004.png geometry.json" {
		t.Errorf("outputs: %s", got)
	}
	h, data, err := npy.ReadAll64(filepath.Join(dir, "drr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if npy.ShapeString(h.Shape) != "(5, 12, 10)" {
		t.Fatalf("drr.npy shape %s", npy.ShapeString(h.Shape))
	}
	// The graph's statistics give the same Max as the images, and Sum is
	// their sum in order, whatever the batch.
	sum, mx := 0.0, 0.0
	for _, v := range data {
		sum += float64(float32(v))
		mx = max(mx, v)
	}
	r := task.Summary()
	if r.Sum != sum || r.Max != mx || mx == 0 || task.AllMissed() {
		t.Errorf("sum %v max %v (all missed %v), images give %v and %v", r.Sum, r.Max, task.AllMissed(), sum, mx)
	}
	for _, batch := range []int{1, 3, 5} {
		t2, err := OpenDRR(smallDRR(""), dev, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dev.WithBatch(batch).Run(context.Background(), t2.Job()); err != nil {
			t.Fatal(err)
		}
		if got := t2.Summary(); got != r {
			t.Errorf("batch %d: %+v, want %+v", batch, got, r)
		}
		t2.Close()
	}
}

// Without withOutput nothing is created, whatever Out says.
func TestOpenDRRWithoutOutput(t *testing.T) {
	dev, err := engine.CPU(0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	s := smallDRR(dir)
	s.PNG = true
	task, err := OpenDRR(s, dev, false)
	if err != nil {
		t.Fatal(err)
	}
	task.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("--out made without output: %v", err)
	}
}

// parseFormats puts the formats in one order, whatever the spelling.
func TestParseFormats(t *testing.T) {
	for in, want := range map[string]string{"": "npy", "npy": "npy", "tiff,npy": "npy tiff", " TIF , mha": "mha tiff", "mha,tiff,npy": "npy mha tiff"} {
		got, err := parseFormats(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("%q: %v %v, want %s", in, got, err, want)
		}
	}
}

// --format writes drr.mha and drr.tiff beside or instead of drr.npy, each
// holding the images as drr.npy's data, byte for byte, after its own
// header; PNGs scaled over the run's range read the images back from
// whichever comes first. The formats are not part of what a checkpoint
// records: a run resumed with other formats writes what a run with those
// formats from the start writes.
func TestOpenDRRFormats(t *testing.T) {
	dev, err := engine.CPU(0)
	if err != nil {
		t.Fatal(err)
	}
	dev = dev.Quiet()
	root := t.TempDir()
	run := func(dir, format string, stopAfter int, resume bool) {
		t.Helper()
		s := smallDRR(filepath.Join(root, dir))
		s.Format, s.PNG, s.PNGScale, s.Resume = format, true, "global", resume
		task, err := OpenDRR(s, dev, true)
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		job := task.Job()
		if stopAfter > 0 {
			job = &stopAfterBatches{Job: job, left: stopAfter}
		}
		if _, err := dev.WithBatch(2).Run(context.Background(), job); err != nil {
			if stopAfter > 0 {
				return // stopped: Close keeps the checkpoint
			}
			t.Fatal(err)
		}
		if err := task.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	run("npy", "", 0, false)
	run("all", "tiff,mha,npy", 0, false)
	run("tiff", "tiff", 0, false)
	run("resumed", "mha", 1, false)
	if _, err := os.Stat(filepath.Join(root, "resumed", "drr.npy.ckpt")); err != nil {
		t.Fatalf("no checkpoint after a stopped run: %v", err)
	}
	run("resumed", "npy,tiff", 0, true)

	read := func(dir, name string) []byte {
		b, err := os.ReadFile(filepath.Join(root, dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	names := func(dir string) string {
		entries, _ := os.ReadDir(filepath.Join(root, dir))
		var n []string
		for _, e := range entries {
			n = append(n, e.Name())
		}
		return strings.Join(n, " ")
	}
	pngs := "drr_0000.png drr_0001.png drr_0002.png drr_0003.png drr_0004.png geometry.json"
	for dir, want := range map[string]string{"npy": "drr.npy ", "all": "drr.mha drr.npy drr.tiff ", "tiff": "drr.tiff ", "resumed": "drr.npy drr.tiff "} {
		if got := names(dir); got != want+pngs {
			t.Errorf("%s: %s, want %s", dir, got, want+pngs)
		}
	}
	npyFile := read("npy", "drr.npy")
	data := npyFile[len(npyFile)-5*12*10*4:]
	for _, f := range []struct{ dir, name string }{{"all", "drr.mha"}, {"all", "drr.tiff"}, {"tiff", "drr.tiff"}} {
		if b := read(f.dir, f.name); !bytes.Contains(b, data) {
			t.Errorf("%s/%s does not hold drr.npy's images", f.dir, f.name)
		}
	}
	if b := read("all", "drr.mha"); !bytes.HasPrefix(b, []byte("ObjectType = Image\n")) || !bytes.Contains(b, []byte("ElementSpacing = 16 16 1\nDimSize = 10 12 5\n")) || !bytes.HasSuffix(b, data) {
		t.Errorf("drr.mha: a header of the wrong size or spacing, or not the images after it:\n%s", b[:min(len(b), 400)])
	}
	for _, dir := range []string{"all", "tiff", "resumed"} {
		for _, n := range strings.Fields(pngs) {
			if !bytes.Equal(read(dir, n), read("npy", n)) {
				t.Errorf("%s/%s differs from the drr.npy run's", dir, n)
			}
		}
	}
	for _, n := range []string{"drr.npy", "drr.tiff"} {
		if !bytes.Equal(read("resumed", n), read("all", n)) {
			t.Errorf("the resumed run's %s differs from the uninterrupted run's", n)
		}
	}
}

// stopAfterBatches fails a job's Consume after its first left batches, as
// a run stopped part way.
type stopAfterBatches struct {
	engine.Job
	left int
}

func (s *stopAfterBatches) Consume(out []*tensor.Dense, off, n int) error {
	if s.left == 0 {
		return errors.New("stopped")
	}
	s.left--
	return s.Job.Consume(out, off, n)
}
