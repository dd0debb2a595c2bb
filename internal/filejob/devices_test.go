package filejob_test

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// Every workload's job run by the engine on several CPU "devices" at once
// (the engine's own multi-device loop is tested against a fake workload in
// internal/engine).

// cpus stands for several devices: one CPU Program per entry, run
// concurrently by the multi-device loop.
func cpus(n int) []ops.Device { return make([]ops.Device, n) }

// Spreading batches over several Programs changes nothing in the results:
// every workload, 2 and 3 "devices", against a single-Program run, with
// batch counts that are not multiples of the device count.
func TestDevicesMatchSingleRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	x := make([]float64, 1001)
	for i := range x {
		x[i] = -1 + 3*rng.Float64()
	}
	tab, _ := workloadtest.RandomInterpTable(t, rng, 11, 13, ops.ReduceNone, tensor.Float64)
	imgs := make([]float32, 97*23)
	for i := range imgs {
		imgs[i] = float32(rng.NormFloat64())
	}
	data, err := pairwise.NewPairData(imgs, 97, 23, pairwise.MetricL2)
	if err != nil {
		t.Fatal(err)
	}
	vol := &volume.Volume{N: [3]int64{12, 10, 8}, Origin: [3]float64{-6, -5, -4}, Spacing: [3]float64{1, 1, 1},
		V: make([]float32, 12*10*8)}
	for i := range vol.V {
		vol.V[i] = rng.Float32()
	}
	poses, err := ops.Orbit(11, [3]float64{}, 100, 40, 9, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	wv := make([]float32, 9*8*7)
	for i := range wv {
		wv[i] = float32(rng.NormFloat64())
	}
	var combos []wavelet.Combo
	for i := range 13 {
		combos = append(combos, wavelet.Combo{Theta: float64(i) * 0.3, Phi: float64(i) * 0.7, Xi: 1 + float64(i%3)})
	}
	type run struct {
		job    func() engine.Job
		result func(engine.Job) []float64
	}
	runs := map[string]run{
		"interp": {func() engine.Job {
			j := newTestInterp(t, tab, ops.ReduceNone, tensor.Float64, x)
			return j
		}, func(j engine.Job) []float64 { return []float64{j.(*interp.Job).Sum} }},
		"affinity symmetric": {func() engine.Job {
			j, err := affinity.New(affinity.Setup{Data: data, Metric: pairwise.MetricL2, Symmetric: true})
			if err != nil {
				t.Fatal(err)
			}
			return j
		}, func(j engine.Job) []float64 { return []float64{j.(*affinity.Job).Checksum} }},
		"affinity top-k": {func() engine.Job {
			j, err := affinity.New(affinity.Setup{Data: data, Metric: pairwise.MetricL2, TopK: 5})
			if err != nil {
				t.Fatal(err)
			}
			return j
		}, func(j engine.Job) []float64 {
			a := j.(*affinity.Job)
			out := append([]float64{}, a.Values...)
			for _, i := range a.Indices {
				out = append(out, float64(i))
			}
			return out
		}},
		"drr": {func() engine.Job {
			j, err := drr.New(drr.Setup{Vol: vol, Poses: poses, Step: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			return j
		}, func(j engine.Job) []float64 { return []float64{j.(*drr.Job).Sum, j.(*drr.Job).Max} }},
		"wavelet": {func() engine.Job {
			_, pad := wavelet.HatPads([3]int{9, 8, 7}, 1, combos)
			src, err := ops.NewWaveletSource(wv, [3]int{9, 8, 7}, 1, ops.Reflect, pad)
			if err != nil {
				t.Fatal(err)
			}
			j, err := wavelet.New(wavelet.Setup{Src: src, Combos: combos})
			if err != nil {
				t.Fatal(err)
			}
			return j
		}, func(j engine.Job) []float64 {
			var out []float64
			for _, s := range j.(*wavelet.Job).Stats {
				out = append(out, s[:]...)
			}
			return out
		}},
	}
	for name, r := range runs {
		one := r.job()
		if _, err := engine.Run(t.Context(), one, engine.RunConfig{MemLimit: 1 << 30, Batch: 4}); err != nil {
			t.Fatal(err)
		}
		want := r.result(one)
		for _, nd := range []int{2, 3} {
			j := r.job()
			out, err := engine.Run(t.Context(), j, engine.RunConfig{MemLimit: 1 << 30, Batch: 4, Devices: cpus(nd)})
			if err != nil {
				t.Fatalf("%s on %d devices: %v", name, nd, err)
			}
			if out.Summary.Batches != out.Plan.Batches {
				t.Errorf("%s on %d devices: %d batch records, want %d", name, nd, out.Summary.Batches, out.Plan.Batches)
			}
			got := r.result(j)
			if len(got) != len(want) {
				t.Fatalf("%s on %d devices: %d results, want %d", name, nd, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s on %d devices: result %d is %v, want %v", name, nd, i, got[i], want[i])
				}
			}
		}
	}
}

func newTestInterp(t testing.TB, tab *ops.InterpTable, r ops.Reduce, dt tensor.Dtype, x []float64) *interp.Job {
	job, err := interp.New(interp.Setup{Table: tab, Reduce: r, Dtype: dt, Queries: &workloadtest.MemQueries{X: x}})
	if err != nil {
		t.Fatal(err)
	}
	return job
}
