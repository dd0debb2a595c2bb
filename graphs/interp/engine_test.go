package interp_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
	"github.com/tapeloop/tapeloop/ops"
)

// The interpolation compiled and run by the engine: its replays allocate
// only the tape's bookkeeping, its heap stays flat over 1,000 of them, and
// its batching does not show in its results. (The engine's own behaviour
// is tested against a fake workload in internal/engine.)

func newTestInterp(t testing.TB, tab *ops.InterpTable, r ops.Reduce, dt tensor.Dtype, x []float64) *interp.Job {
	job, err := interp.New(interp.Setup{Table: tab, Reduce: r, Dtype: dt, Queries: &workloadtest.MemQueries{X: x}})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// TestProgramReplayDoesNotAllocate: a replay of the compiled interpolation,
// with and without its reduction, allocates at most 64 small objects.
func TestProgramReplayDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, r := range []ops.Reduce{ops.ReduceSumSq, ops.ReduceNone} {
		tab, _ := workloadtest.RandomInterpTable(t, rng, 50, 300, r, tensor.Float32)
		const batch = 4096
		job := newTestInterp(t, tab, r, tensor.Float32, make([]float64, batch))
		p, err := engine.Compile(job, batch)
		if err != nil {
			t.Fatal(err)
		}
		x := p.Inputs()[0].Data().([]float32)
		for i := range x {
			x[i] = rng.Float32() * 100
		}
		replay := func() {
			if _, err := p.Run(); err != nil {
				t.Fatal(err)
			}
		}
		replay() // the first run allocates the ops' outputs
		allocs := testing.AllocsPerRun(200, replay)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 200
		for range runs {
			replay()
		}
		runtime.ReadMemStats(&after)
		perRun := float64(after.TotalAlloc-before.TotalAlloc) / runs
		t.Logf("%v: %.0f allocations, %.0f bytes per replay", r, allocs, perRun)
		if allocs > 64 {
			t.Errorf("%v: %.0f allocations per replay, want ≤ 64", r, allocs)
		}
		if perRun > 16<<10 {
			t.Errorf("%v: %.0f bytes allocated per replay, want ≤ 16 KiB", r, perRun)
		}
		p.Close()
	}
}

func TestProgramHeapStaysFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tab, _ := workloadtest.RandomInterpTable(t, rng, 30, 200, ops.ReduceSumSq, tensor.Float64)
	job := newTestInterp(t, tab, ops.ReduceSumSq, tensor.Float64, make([]float64, 1024))
	p, err := engine.Compile(job, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for range 10 {
		if _, err := p.Run(); err != nil {
			t.Fatal(err)
		}
	}
	h10 := heap()
	for range 990 {
		if _, err := p.Run(); err != nil {
			t.Fatal(err)
		}
	}
	h1000 := heap()
	t.Logf("heap after 10 replays %d B, after 1000 %d B", h10, h1000)
	if d := int64(h1000) - int64(h10); d > 1<<20 {
		t.Errorf("heap grew by %d bytes from 10 to 1000 replays, want ≤ 1 MiB", d)
	}
}

// TestInterpBatchingIsInvisible checks the batched run against one op call
// over all queries at once, for batch sizes that do not divide N, and the
// result order through the sum of each query's own reduced value.
func TestInterpBatchingIsInvisible(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 1009
	x := make([]float64, n)
	for i := range x {
		x[i] = -1 + rng.Float64()*3
	}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for _, r := range []ops.Reduce{ops.ReduceSumSq, ops.ReduceSum, ops.ReduceNone} {
			tab, _ := workloadtest.RandomInterpTable(t, rng, 17, 9, r, dt)
			whole := ops.NewInterp1D(tab, r, ops.MethodAuto, dt, n)
			var in *tensor.Dense
			if dt == tensor.Float32 {
				// As the job feeds float32 queries on a grid off zero:
				// x − a, formed in float64 (Interp1D.Local).
				whole.Local = interp.Local(dt, tab.A)
				x32 := make([]float32, n)
				for i := range x {
					x32[i] = float32(x[i])
					if whole.Local {
						x32[i] = float32(x[i] - tab.A)
					}
				}
				in = tensor.New(tensor.WithBacking(x32))
			} else {
				in = tensor.New(tensor.WithBacking(x))
			}
			v, err := whole.Do(in)
			if err != nil {
				t.Fatal(err)
			}
			var want float64
			switch d := v.(*tensor.Dense).Data().(type) {
			case []float32:
				want = sum(d)
			case []float64:
				want = sum(d)
			}
			for _, batch := range []int{1, 7, 100, 1008, 5000} {
				job := newTestInterp(t, tab, r, dt, x)
				out, err := engine.Run(t.Context(), job, engine.RunConfig{MemLimit: 1 << 30, Batch: batch})
				if err != nil {
					t.Fatal(err)
				}
				if wantBatches := (n + min(batch, n) - 1) / min(batch, n); out.Plan.Batches != wantBatches || len(out.Iterations) != wantBatches {
					t.Errorf("batch %d: %d batches, %d records, want %d", batch, out.Plan.Batches, len(out.Iterations), wantBatches)
				}
				if d := math.Abs(job.Sum-want) / math.Abs(want); d > 1e-12 {
					t.Errorf("%v %v batch %d: sum %.17g, want %.17g", dt, r, batch, job.Sum, want)
				}
			}
		}
	}
}

// sum adds up x in float64, in order.
func sum[T float32 | float64](x []T) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s
}
