package bench

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/internal/testutil"
	"github.com/tapeloop/tapeloop/ops"
)

func waveletJob(b *testing.B, n int, bnd ops.Boundary, combos []graphs.Combo) *graphs.Wavelet {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, n*n*n)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	_, pad := graphs.WaveletPads(1, combos)
	src, err := ops.NewWaveletSource(x, [3]int{n, n, n}, 1, bnd, pad)
	if err != nil {
		b.Fatal(err)
	}
	job, err := graphs.NewWavelet(graphs.WaveletConfig{Src: src, Combos: combos})
	if err != nil {
		b.Fatal(err)
	}
	return job
}

func randomCombos(k int, xis []float64) []graphs.Combo {
	rng := rand.New(rand.NewPCG(3, 4))
	var c []graphs.Combo
	for i := range k {
		c = append(c, graphs.Combo{Theta: rng.Float64() * math.Pi, Phi: rng.Float64() * math.Pi, Xi: xis[i%len(xis)]})
	}
	return c
}

// BenchmarkWaveletSteadyState sweeps 512 combinations over a 24³ volume
// (wrap) through one graph, 4 per batch, and reports the run's drift and
// Go heap growth.
func BenchmarkWaveletSteadyState(b *testing.B) {
	combos := randomCombos(512, []float64{1, 2})
	var drift, growth []float64
	for b.Loop() {
		job := waveletJob(b, 24, ops.Wrap, combos)
		out, err := graphs.Run(context.Background(), job, graphs.RunConfig{MemLimit: 1 << 30, Batch: 4})
		if err != nil {
			b.Fatal(err)
		}
		drift = append(drift, out.Summary.Drift)
		growth = append(growth, float64(out.Summary.HeapGrowth))
	}
	b.ReportMetric(median(drift), "drift")
	b.ReportMetric(median(growth), "heap-growth-B")
}

// benchmarkWavelet times a sweep of 12 combinations at 200³ (ξ ∈ {1, 2, 4},
// random orientations, a = 1; the volume transformed once per ξ in reflect
// mode, once in wrap mode, inside the timing) and SciPy's fftconvolve of one
// combination beside.
func benchmarkWavelet(b *testing.B, bnd ops.Boundary) {
	const n, k = 200, 12
	combos := randomCombos(k, []float64{1, 2, 4})
	job := waveletJob(b, n, bnd, combos)
	var ours []float64
	for b.Loop() {
		t0 := time.Now()
		if _, err := graphs.Run(context.Background(), job, graphs.RunConfig{MemLimit: 8 << 30, Batch: 1}); err != nil {
			b.Fatal(err)
		}
		ours = append(ours, time.Since(t0).Seconds()/k)
	}
	b.ReportMetric(median(ours), "s/combination")
	py := testutil.Python(b, "numpy", "scipy.signal")
	out, err := exec.Command(py, "peers/wavelet_scipy.py", "--size", strconv.Itoa(n), "--xi", "2").Output()
	if err != nil {
		b.Fatalf("peer: %v", err)
	}
	var r struct{ Seconds float64 }
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.Seconds, "scipy-s/combination")
	b.ReportMetric(r.Seconds/median(ours), "speedup")
}

func BenchmarkWaveletWrap200(b *testing.B)    { benchmarkWavelet(b, ops.Wrap) }
func BenchmarkWaveletReflect200(b *testing.B) { benchmarkWavelet(b, ops.Reflect) }
