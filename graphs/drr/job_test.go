package drr

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// smallSetup is a quick case, the CLI's default DRR made small: the 24³
// phantom over a 5-pose orbit onto 12×10 pixels of 16 mm, under c.
func smallSetup(t testing.TB, c Config) Setup {
	t.Helper()
	v := volume.Phantom(24, 192, c.Water())
	poses, err := ops.Orbit(5, v.Centre(), 1020, 510, 12, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Prepare(v, 12, 10)
	if err != nil {
		t.Fatal(err)
	}
	s.Poses = poses
	return s
}

func smallJob(t testing.TB, c Config) *Job {
	t.Helper()
	j, err := New(smallSetup(t, c))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func cpu(t testing.TB) *engine.Device {
	t.Helper()
	dev, err := engine.CPU(0)
	if err != nil {
		t.Fatal(err)
	}
	return dev.Quiet()
}

// The graph is poses → DRR → images → ImageStats → stats.
func TestGraph(t *testing.T) {
	var b strings.Builder
	if err := cpu(t).WithBatch(2).WriteDOT(&b, smallJob(t, DefaultConfig())); err != nil {
		t.Fatal(err)
	}
	dot := b.String()
	for _, want := range []string{`poses\ninput\n(2, 12) float64`, `images\nDRR{24x24x24 volume, 12x10 detector, siddon}\n(2, 12, 10) float32`,
		`stats\nImageStats{per image: min, max, nonzero pixels}\n(2, 3) float64`} {
		if !strings.Contains(dot, want) {
			t.Errorf("graph lacks %q:\n%s", want, dot)
		}
	}
	if n := strings.Count(dot, " -> "); n != 2 {
		t.Errorf("%d edges, want 2:\n%s", n, dot)
	}
}

// Replaying the DRR graph, statistics included, allocates no buffers.
func TestReplayDoesNotAllocate(t *testing.T) {
	job := smallJob(t, DefaultConfig())
	p, err := engine.Compile(job, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := job.Feed(p.Inputs(), 0, 4); err != nil {
		t.Fatal(err)
	}
	replay := func() {
		if _, err := p.Run(); err != nil {
			t.Fatal(err)
		}
	}
	replay() // the first run allocates the ops' outputs
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 100
	for range runs {
		replay()
	}
	runtime.ReadMemStats(&after)
	allocs := testing.AllocsPerRun(runs, replay)
	perRun := float64(after.TotalAlloc-before.TotalAlloc) / runs
	t.Logf("%.0f allocations, %.0f bytes per replay", allocs, perRun)
	if allocs > 64 || perRun > 16<<10 {
		t.Errorf("%.0f allocations, %.0f bytes per replay; want ≤ 64 and ≤ 16 KiB", allocs, perRun)
	}
}

// memSaver keeps what a Job saves, as a checkpoint would.
type memSaver struct {
	imgs [][]float32
	hits []int
}

func (m *memSaver) Save(first int, imgs []float32, hits []int) error {
	if first != len(m.imgs) {
		return &saveOrderError{first, len(m.imgs)}
	}
	per := len(imgs) / len(hits)
	for r, h := range hits {
		m.imgs = append(m.imgs, slices.Clone(imgs[r*per:(r+1)*per]))
		m.hits = append(m.hits, h)
	}
	return nil
}

func (m *memSaver) StagingBytes(n int) int64 { return 0 }

type saveOrderError struct{ first, saved int }

func (e *saveOrderError) Error() string { return "saved out of order" }

// A Job hands every pose to its Saver once, in order, whatever the batch;
// a Job that takes some of them back with Restore and renders the rest
// has the same images and the same result as one that rendered all.
func TestSaveAndRestore(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), {Method: "trilinear", Post: "exp(-p)"}} {
		full := smallJob(t, c)
		var want [][]float32
		full.s.Image = func(_ int, img []float32, _, _ float32) error { want = append(want, slices.Clone(img)); return nil }
		saved := &memSaver{}
		full.SetSaver(saved)
		if _, err := cpu(t).WithBatch(2).Run(context.Background(), full); err != nil {
			t.Fatal(err)
		}
		if len(saved.imgs) != 5 {
			t.Fatalf("%s: %d poses saved, want 5", c.Method, len(saved.imgs))
		}
		for i := range want {
			if !slices.Equal(saved.imgs[i], want[i]) {
				t.Fatalf("%s: pose %d saved differs from the one rendered", c.Method, i)
			}
		}
		for _, k := range []int{0, 2, 5} {
			j := smallJob(t, c)
			var got [][]float32
			j.s.Image = func(i int, img []float32, _, _ float32) error {
				if i != len(got) {
					t.Errorf("%s: image %d after %d", c.Method, i, len(got))
				}
				got = append(got, slices.Clone(img))
				return nil
			}
			for i := range k {
				if err := j.Restore(i, saved.imgs[i], saved.hits[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.Restore(k+1, saved.imgs[0], 0); err == nil || !strings.Contains(err.Error(), "restored after") {
				t.Errorf("%s: pose %d restored after %d: %v", c.Method, k+1, k, err)
			}
			if j.Items() != 5-k {
				t.Errorf("%s: %d restored, %d items left", c.Method, k, j.Items())
			}
			if k < 5 {
				if _, err := cpu(t).WithBatch(3).Run(context.Background(), j); err != nil {
					t.Fatal(err)
				}
			}
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("%s, %d restored: pose %d differs", c.Method, k, i)
				}
			}
			if g, w := j.Result(), full.Result(); g != w || j.AllMissed() {
				t.Errorf("%s, %d restored: %+v, want %+v", c.Method, k, g, w)
			}
		}
	}
}
