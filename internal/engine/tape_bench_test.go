package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
)

// BenchmarkTapeHandOff runs one compiled program per workload, on the
// demo's built-in data, at the batch the planner picks and at the demo's
// batch, alternately on the calling goroutine and with gorgonia's RunAll
// (which runs the tape on a goroutine of its own while the caller waits),
// batch by batch, and reports RunAll's time per batch over the caller's:
// the ratio of the fastest batches and of the median ones. Run with
//
//	go test -run '^$' -bench TapeHandOff -benchtime 10x -count 5 ./internal/engine
func BenchmarkTapeHandOff(b *testing.B) {
	block := 50
	cases := []struct {
		name string
		demo int // the demo's batch; 0: the planner's
		open func(dev *engine.Device) (filejob.Task, error)
	}{
		{"interp-sumsq", 1 << 14, func(dev *engine.Device) (filejob.Task, error) {
			s := filejob.InterpSpec{Interpolants: 300, Grid: 4096, Points: 1_000_000, Seed: 1}
			s.Reduce = "sumsq"
			return filejob.OpenInterp(s, dev, false)
		}},
		{"interp-none", 1 << 11, func(dev *engine.Device) (filejob.Task, error) {
			s := filejob.InterpSpec{Interpolants: 300, Grid: 4096, Points: 100_000, Seed: 1}
			s.Reduce = "none"
			return filejob.OpenInterp(s, dev, false)
		}},
		{"affinity-l1", block, func(dev *engine.Device) (filejob.Task, error) {
			s := filejob.AffinitySpec{N: 2000, Height: 64, Width: 64, Seed: 1, Streamed: true}
			s.Metric = "l1"
			return filejob.OpenAffinity(s, dev, false)
		}},
		{"drr-siddon", 2, func(dev *engine.Device) (filejob.Task, error) {
			s := filejob.DefaultDRRSpec()
			s.Size, s.Orbit, s.Detector = 96, 72, "128x128"
			return filejob.OpenDRR(s, dev, false)
		}},
		{"wavelet", 2, func(dev *engine.Device) (filejob.Task, error) {
			s := filejob.WaveletSpec{Config: wavelet.Config{A: 1, Boundary: "wrap"}, Size: "24x24x24", Seed: 1, Theta: "0:pi:8", Phi: "0:pi:4", Xi: "1,2"}
			return filejob.OpenWavelet(s, dev, false)
		}},
	}
	for _, c := range cases {
		for _, which := range []string{"planned", "demo"} {
			b.Run(c.name+"/batch="+which, func(b *testing.B) {
				dev, err := engine.CPU(0)
				if err != nil {
					b.Fatal(err)
				}
				dev = dev.Quiet()
				if which == "demo" {
					dev = dev.WithBatch(c.demo)
				}
				benchmarkHandOff(b, dev, c.open)
			})
		}
	}
}

func benchmarkHandOff(b *testing.B, dev *engine.Device, open func(*engine.Device) (filejob.Task, error)) {
	task, err := open(dev)
	if err != nil {
		b.Fatal(err)
	}
	defer task.Close()
	if a, ok := task.(interface{ Device() *engine.Device }); ok {
		dev = a.Device()
	}
	job := task.Job()
	rc := dev.RunConfig()
	limit := rc.MemLimit
	if limit == 0 {
		if limit, err = engine.DefaultMemLimit(); err != nil {
			b.Fatal(err)
		}
	}
	plan, err := engine.NewPlan(job, limit, rc.Batch)
	if err != nil {
		b.Fatal(err)
	}
	p, err := engine.Compile(job, plan.Batch)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if !p.RunsOnCaller() {
		b.Skip("the tape does not run on the caller: nothing to compare")
	}
	if err := job.Feed(p.Inputs(), 0, plan.Batch); err != nil {
		b.Fatal(err)
	}
	run := func(runAll bool) time.Duration {
		p.UseRunAll(runAll)
		t0 := time.Now()
		if _, err := p.Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	// Batches alternate one by one, the order swapped from pair to pair,
	// so that both sides see the same load; each iteration runs about
	// 100 ms of pairs.
	run(false)
	run(true)
	one := run(false)
	pairs := max(1, int(50*time.Millisecond/max(one, time.Microsecond)))
	var tc, ta []time.Duration
	k := 0
	for b.Loop() {
		for range pairs {
			if k%2 == 0 {
				tc = append(tc, run(false))
				ta = append(ta, run(true))
			} else {
				ta = append(ta, run(true))
				tc = append(tc, run(false))
			}
			k++
		}
	}
	slices.Sort(tc)
	slices.Sort(ta)
	b.ReportMetric(float64(plan.Batch), "batch")
	b.ReportMetric(float64(len(tc)), "pairs")
	b.ReportMetric(float64(tc[len(tc)/2].Nanoseconds())/1e3, "caller-µs/batch")
	b.ReportMetric(float64(ta[0])/float64(tc[0]), "runall/caller-min")
	b.ReportMetric(float64(ta[len(ta)/2])/float64(tc[len(tc)/2]), "runall/caller-median")
}
