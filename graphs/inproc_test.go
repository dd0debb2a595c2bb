package graphs

import (
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/volume"
)

// inprocDev is the CPU with batch items per batch (0: planned) under
// 1 GiB, in dtype.
func inprocDev(t testing.TB, batch int, dtype string) *engine.Device {
	t.Helper()
	d, err := engine.Open(engine.Engine{MemLimit: 1 << 30, Batch: batch, Dtype: dtype})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCompileDRRMatchesTheCLIRun(t *testing.T) {
	for _, method := range []string{"siddon", "trilinear"} {
		s := DefaultDRRSpec()
		s.Size, s.Orbit, s.Detector, s.Method = 23, 5, "17x13", method
		s.Post = "exp(-p)"
		task, err := OpenDRR(s, cpuDevice(t, 1<<30, "float32"), false)
		if err != nil {
			t.Fatal(err)
		}
		var want []float32
		task.job.cfg.Image = func(_ int, img []float32, _, _ float32) error { want = append(want, img...); return nil }
		if _, err := engine.Run(t.Context(), task.Job(), engine.RunConfig{MemLimit: 1 << 30}); err != nil {
			t.Fatal(err)
		}
		task.Close()

		s.Post = "exp(-p)"
		v := volume.Phantom(23, 192, s.MuWater)
		p, err := CompileDRR(s, v, 17, 13, inprocDev(t, 2, ""))
		if err != nil {
			t.Fatal(err)
		}
		poses, err := p.Orbit(5, s.SDD, s.SID, s.Pixel)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 5*17*13)
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
