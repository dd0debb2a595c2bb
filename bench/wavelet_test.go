package bench

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/testutil"
	"github.com/tapeloop/tapeloop/ops"
)

func waveletJob(b *testing.B, n int, bnd ops.Boundary, combos []wavelet.Combo) *wavelet.Job {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*n*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	_, pad := wavelet.HatPads([3]int{n, n, n}, 1, combos)
	src, err := ops.NewWaveletSource(x, [3]int{n, n, n}, 1, bnd, pad)
	if err != nil {
		b.Fatal(err)
	}
	job, err := wavelet.New(wavelet.Setup{Src: src, Combos: combos})
	if err != nil {
		b.Fatal(err)
	}
	return job
}

func randomCombos(k int, xis []float64) []wavelet.Combo {
	rng := rand.New(rand.NewPCG(3, 4))
	var c []wavelet.Combo
	for i := range k {
		c = append(c, wavelet.Combo{Theta: rng.Float64() * math.Pi, Phi: rng.Float64() * math.Pi, Xi: xis[i%len(xis)]})
	}
	return c
}

// BenchmarkWaveletSteadyState sweeps 512 combinations over a 48³ volume
// (wrap) through one graph, 4 per batch, and reports the run's drift and
// Go heap growth.
func BenchmarkWaveletSteadyState(b *testing.B) {
	combos := randomCombos(512, []float64{1, 2})
	benchmarkSteadyState(b, 4, func() engine.Job { return waveletJob(b, 48, ops.Wrap, combos) })
}

// benchmarkWavelet times a sweep of 48 combinations at 200³ (ξ ∈ {1, 2, 4},
// random orientations, a = 1) and SciPy's fftconvolve of one combination
// beside. It reports the steady-state cost per combination (the median
// batch of one combination) and the cost with the sweep's one-time work
// (buffers, the volume's transform per padding) spread over 48.
func benchmarkWavelet(b *testing.B, bnd ops.Boundary) {
	const n, k = 200, 48
	combos := randomCombos(k, []float64{1, 2, 4})
	var steady, total []float64
	for b.Loop() {
		job := waveletJob(b, n, bnd, combos)
		t0 := time.Now()
		out, err := engine.Run(context.Background(), job, engine.RunConfig{MemLimit: 8 << 30, Batch: 1})
		if err != nil {
			b.Fatal(err)
		}
		total = append(total, time.Since(t0).Seconds()/k)
		// One combination per batch: the median batch is the steady-state
		// cost per combination that a long sweep sees, without the
		// one-time work (buffers, the volume's transform per padding).
		secs := make([]float64, len(out.Iterations))
		for i, it := range out.Iterations {
			secs[i] = it.Seconds
		}
		steady = append(steady, median(secs))
	}
	b.ReportMetric(median(steady), "s/combination")
	b.ReportMetric(median(total), "s/combination-with-setup")
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
	b.ReportMetric(r.Seconds/median(steady), "speedup")
}

func BenchmarkWaveletWrap200(b *testing.B)    { benchmarkWavelet(b, ops.Wrap) }
func BenchmarkWaveletReflect200(b *testing.B) { benchmarkWavelet(b, ops.Reflect) }

// benchmarkWaveletColumns times, interleaved (the order alternating from
// one iteration to the next), a sweep of 12 combinations at 200³ (ξ ∈ {1,
// 2, 4}, random orientations, a = 1, one combination per batch) writing
// every statistic and writing the energy and std alone (--columns
// energy,std). It reports each one's steady cost per combination (the
// median batch), the median and the least over the iterations, and the
// ratio energy+std / all of each iteration, median and least. In wrap mode
// the energy and std come from the spectrum with no inverse transform; in
// reflect mode they are the response's cropped from a larger transform,
// which only the inverse transform gives.
func benchmarkWaveletColumns(b *testing.B, bnd ops.Boundary) {
	const n, k = 200, 12
	combos := randomCombos(k, []float64{1, 2, 4})
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*n*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	_, pad := wavelet.HatPads([3]int{n, n, n}, 1, combos)
	sup, _ := wavelet.Supports(1, nil, combos)
	steady := func(cols []string) float64 {
		src, err := ops.NewWaveletSource(x, [3]int{n, n, n}, 1, bnd, pad)
		if err != nil {
			b.Fatal(err)
		}
		src.MaxSupport = wavelet.MaxSupport(sup)
		job, err := wavelet.New(wavelet.Setup{Src: src, Combos: combos, Columns: cols})
		if err != nil {
			b.Fatal(err)
		}
		out, err := engine.Run(context.Background(), job, engine.RunConfig{MemLimit: 8 << 30, Batch: 1})
		if err != nil {
			b.Fatal(err)
		}
		secs := make([]float64, len(out.Iterations))
		for i, it := range out.Iterations {
			secs[i] = it.Seconds
		}
		return median(secs)
	}
	var all, some, ratio []float64
	i := 0
	for b.Loop() {
		var a, s float64
		if i%2 == 0 {
			a, s = steady(nil), steady([]string{"energy", "std"})
		} else {
			s, a = steady([]string{"energy", "std"}), steady(nil)
		}
		all, some, ratio = append(all, a), append(some, s), append(ratio, s/a)
		i++
	}
	b.ReportMetric(median(all), "all-s/combination")
	b.ReportMetric(slices.Min(all), "all-min-s/combination")
	b.ReportMetric(median(some), "energy+std-s/combination")
	b.ReportMetric(slices.Min(some), "energy+std-min-s/combination")
	b.ReportMetric(median(ratio), "energy+std/all")
	b.ReportMetric(slices.Min(ratio), "energy+std/all-min")
}

func BenchmarkWaveletColumnsWrap200(b *testing.B)    { benchmarkWaveletColumns(b, ops.Wrap) }
func BenchmarkWaveletColumnsReflect200(b *testing.B) { benchmarkWaveletColumns(b, ops.Reflect) }
