package graphs

import (
	"errors"
	"runtime"
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

func TestCompileInterp(t *testing.T) {
	const m, g, batch = 7, 33, 1001
	f := make([]float64, m*g)
	for i := range f {
		f[i] = float64(i%g) * 0.25
	}
	p, err := CompileInterp(InterpSpec{Reduce: "sum"}, f, m, g, inprocDev(t, batch, "float64"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x := make([]float64, batch)
	for i := range x {
		x[i] = float64(i) / batch
	}
	dst := make([]float64, p.OutLen(batch))
	if err := p.Run(x, dst); err != nil {
		t.Fatal(err)
	}
	first := append([]float64(nil), dst...)
	allocs := testing.AllocsPerRun(50, func() {
		if err := p.Run(x, dst); err != nil {
			t.Fatal(err)
		}
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if err := p.Run(x, dst); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / 100
	t.Logf("%.0f allocations, %d bytes per Run", allocs, perRun)
	// The TapeMachine's own bookkeeping allocates a little per run; no
	// buffer of the batch's size may be among it.
	if allocs > 64 || perRun > 4096 {
		t.Errorf("a Run allocates %.0f objects, %d bytes: want at most 64 and 4096 (the batch is %d bytes)", allocs, perRun, 8*batch)
	}
	for i := range dst {
		if dst[i] != first[i] {
			t.Fatalf("run 2 differs from run 1 at %d: %g, %g", i, dst[i], first[i])
		}
	}
	// Any number of queries: blocks of the batch, the last one short, each
	// query's value the same as in one block.
	long := make([]float64, 2*batch+batch/3)
	for i := range long {
		long[i] = x[(i*13)%batch]
	}
	got := make([]float64, len(long))
	if err := p.Run(long, got); err != nil {
		t.Fatal(err)
	}
	for i := range long {
		if got[i] != first[(i*13)%batch] {
			t.Fatalf("query %d of %d: %g, alone in a full block %g", i, len(long), got[i], first[(i*13)%batch])
		}
	}
	if err := p.Run(x[:0], dst[:0]); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("no queries: %v, want ErrBatch", err)
	}
	if err := p.Run(x[:batch-1], dst); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("out of the wrong length: %v, want ErrBatch", err)
	}
	if err := p.Run(make([]float32, batch), make([]float32, batch)); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("float32 batch of a float64 program: %v, want ErrBatch", err)
	}
	if _, err := CompileInterp(InterpSpec{Reduce: "max(w)"}, f, m, g, inprocDev(t, batch, "float64")); err == nil || !strings.HasPrefix(err.Error(), `--reduce "max(w)"`) {
		t.Errorf("bad formula: %v", err)
	}
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
