package filejob

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func TestCompileDRRMatchesTheCLIRun(t *testing.T) {
	for _, method := range []string{"siddon", "trilinear"} {
		s := DefaultDRRSpec()
		s.Size, s.Orbit, s.Detector, s.Method = 23, 5, "17x13", method
		s.Post = "exp(-p)"
		s.Out = filepath.Join(t.TempDir(), "out")
		task, err := OpenDRR(s, cpuDevice(t, 1<<30, "float32"), true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Run(t.Context(), task.Job(), engine.RunConfig{MemLimit: 1 << 30}); err != nil {
			t.Fatal(err)
		}
		if err := task.Commit(); err != nil {
			t.Fatal(err)
		}
		task.Close()
		_, w, err := npy.ReadAll64(filepath.Join(s.Out, "drr.npy"))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(w))
		for i, x := range w {
			want[i] = float32(x)
		}

		v := volume.Phantom(23, 192, s.Water())
		p, err := drr.Compile(s.Config, v, 17, 13, workloadtest.CPU(t, 2, ""))
		if err != nil {
			t.Fatal(err)
		}
		poses, err := p.Orbit(5, s.SDD, s.SID, s.Pixel)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 5*17*13)
		if len(want) != len(got) {
			t.Fatalf("drr.npy holds %d values, want %d", len(want), len(got))
		}
		for range 2 {
			if err := p.Run(poses, got); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: pixel %d: %g, the CLI's run %g", method, i, got[i], want[i])
				}
			}
		}
		if p.Report().Calls != 2 || p.Report().LastBatches != 3 {
			t.Errorf("report: %+v, want 2 calls of 3 batches", p.Report())
		}
		bad := append([]float64(nil), poses...)
		bad[12] = 0 // a zero pixel size
		if err := p.Run(bad, got); err == nil || !strings.Contains(err.Error(), "pose 0 has pixel size") {
			t.Errorf("bad pose: %v", err)
		}
		p.Close()
	}
}
