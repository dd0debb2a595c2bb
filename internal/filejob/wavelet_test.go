package filejob

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func TestWaveletSpecValidate(t *testing.T) {
	workloadtest.RunValidate(t, DefaultWaveletSpec, (*WaveletSpec).Validate, []struct {
		Name string
		Edit func(*WaveletSpec)
		Want string // "": valid
	}{
		{"defaults", func(*WaveletSpec) {}, ""},
		{"wrap", func(s *WaveletSpec) { s.Boundary = "wrap" }, ""},
		{"boundary empty is reflect", func(s *WaveletSpec) { s.Boundary = "" }, ""},
		{"volume file: size unused", func(s *WaveletSpec) { s.Volume, s.Size = "v.npy", "" }, ""},
		{"xi zero: a row of NaN", func(s *WaveletSpec) { s.Xi = "0,1" }, ""},
		{"xi negative: a row of NaN", func(s *WaveletSpec) { s.Xi = "-1" }, ""},
		{"a zero", func(s *WaveletSpec) { s.A = 0 }, "θ = 0, φ = 0, ξ = 1: wavelet: scale a = 0 must be positive"},
		{"a infinite", func(s *WaveletSpec) { s.A = math.Inf(1) }, "a = +Inf"},
		{"a NaN", func(s *WaveletSpec) { s.A = math.NaN() }, "a = NaN"},
		{"a before xi", func(s *WaveletSpec) { s.A, s.Xi = 0, "0" }, "scale a = 0"},
		{"empty list", func(s *WaveletSpec) { s.Theta = "" }, "--theta: empty list"},
		{"malformed range", func(s *WaveletSpec) { s.Phi = "0:pi" }, `--phi "0:pi": want START:STOP:COUNT`},
		{"zero count", func(s *WaveletSpec) { s.Phi = "0:pi:0" }, "COUNT"},
		{"bad number", func(s *WaveletSpec) { s.Xi = "two" }, `--xi: "two" is not a number`},
		{"NaN angle", func(s *WaveletSpec) { s.Theta = "nan" }, `--theta: "nan" is not a number`},
		{"boundary", func(s *WaveletSpec) { s.Boundary = "mirror" }, `--boundary: unknown boundary "mirror"`},
		{"boundary first", func(s *WaveletSpec) { s.Boundary, s.Xi = "mirror", "0" }, "--boundary"},
		{"size 2-D", func(s *WaveletSpec) { s.Size = "8x8" }, `--size "8x8": want XxYxZ`},
		{"size empty", func(s *WaveletSpec) { s.Size = "" }, "--size"},
		{"size zero", func(s *WaveletSpec) { s.Size = "0x3x3" }, "--size"},
		{"size trailing", func(s *WaveletSpec) { s.Size = "3x3x3x" }, "--size"},
		{"size too large", func(s *WaveletSpec) { s.Size = "1000x1000x1000" }, "--size"},
		{"sweep before size", func(s *WaveletSpec) { s.Size, s.Xi = "8x8", "1:2:0" }, "--xi"},
	})
}

// The CSV goes to Stdout without Out, to Out (renamed into place on
// Commit) with it, and nowhere before Commit or after Close; a run closed
// before Commit leaves only its checkpoint.
func TestWaveletTaskOutput(t *testing.T) {
	d, err := engine.CPU(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	d = d.Quiet()
	spec := WaveletSpec{Config: wavelet.Config{A: 1, Boundary: "wrap"}, Size: "6x5x4", Seed: 1, Theta: "0,0.5", Phi: "1", Xi: "1,2"}
	var stdout bytes.Buffer
	spec.Stdout = &stdout
	task, err := OpenWavelet(spec, d, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(t.Context(), task.Job()); err != nil {
		t.Fatal(err)
	}
	if stdout.Len() != 0 {
		t.Errorf("%d bytes written before Commit", stdout.Len())
	}
	if err := task.Commit(); err != nil {
		t.Fatal(err)
	}
	task.Close()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 5 || lines[0] != "theta,phi,xi,energy,std,max,wavelet_energy" || !strings.HasPrefix(lines[1], "0,1,1,") {
		t.Fatalf("CSV:\n%s", stdout.String())
	}

	dir := t.TempDir()
	spec.Out = filepath.Join(dir, "stats.csv")
	for _, commit := range []bool{false, true} {
		spec.Resume = commit // the run not committed left its checkpoint
		task, err := OpenWavelet(spec, d, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Run(t.Context(), task.Job()); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := task.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		task.Close()
		got, err := os.ReadFile(spec.Out)
		if !commit {
			if err == nil {
				t.Error("an output not committed was left behind")
			}
			if _, err := os.Stat(spec.Out + ".ckpt"); err != nil {
				t.Errorf("no checkpoint kept: %v", err)
			}
			continue
		}
		if err != nil || string(got) != stdout.String() {
			t.Errorf("file holds %q (%v), want the CSV written to Stdout", got, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the output directory, want 1", len(entries))
	}
}
