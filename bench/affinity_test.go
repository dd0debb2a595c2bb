package bench

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/testutil"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

func randomImages(n, d int) []float32 {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*d)
	sysmem.AdviseHugePagesOf(x) // as tapeloop affinity does
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// affinityRun computes the whole (N, N) matrix as `tapeloop affinity` does
// when it fits in memory (each pair once), without writing it, and returns
// the wall time.
func affinityRun(b *testing.B, x []float32, n, d int, m pairwise.Metric) (float64, time.Duration) {
	data, err := pairwise.NewPairData(x, n, d, m)
	if err != nil {
		b.Fatal(err)
	}
	job, err := affinity.New(affinity.Setup{Data: data, Metric: m, Symmetric: true})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if _, err := engine.Run(context.Background(), job, engine.RunConfig{MemLimit: 4 << 30}); err != nil {
		b.Fatal(err)
	}
	return job.Checksum, time.Since(t0)
}

// peer runs bench/peers/affinity_numpy.py and returns its median seconds.
func peer(b *testing.B, n, d int, metric string) float64 {
	py := testutil.Python(b, "numpy", "scipy")
	out, err := exec.Command(py, "peers/affinity_numpy.py", "--n", strconv.Itoa(n), "--d", strconv.Itoa(d), "--metric", metric).Output()
	if err != nil {
		b.Fatalf("peer: %v", err)
	}
	var r struct{ Seconds float64 }
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("peer output %q: %v", out, err)
	}
	return r.Seconds
}

// shortN is n images, or a quarter of them with -short: the whole matrix
// a sixteenth of the work, to check the benchmark itself.
func shortN(n int) int {
	if testing.Short() {
		return n / 4
	}
	return n
}

// benchmarkVsPeer alternates tapeloop and the NumPy/SciPy peer on the same
// sizes and reports both medians and minimums, the ratios of each, and
// tapeloop's rate in pair-dimensions per second of the whole matrix
// (N²·D / median time).
func benchmarkVsPeer(b *testing.B, n, d int, m pairwise.Metric) {
	n = shortN(n)
	x := randomImages(n, d)
	var ours, theirs []float64
	for b.Loop() {
		theirs = append(theirs, peer(b, n, d, m.String()))
		_, t := affinityRun(b, x, n, d, m)
		ours = append(ours, t.Seconds())
	}
	mo, mt := median(ours), median(theirs)
	lo, lt := slices.Min(ours), slices.Min(theirs)
	b.ReportMetric(mo, "tapeloop-s")
	b.ReportMetric(mt, "peer-s")
	b.ReportMetric(mt/mo, "speedup")
	b.ReportMetric(lo, "tapeloop-min-s")
	b.ReportMetric(lt, "peer-min-s")
	b.ReportMetric(lt/lo, "speedup-min")
	b.ReportMetric(float64(n)*float64(n)*float64(d)/mo, "pair-dims/s")
}

// BenchmarkAffinityDotVsNumPy: the original case's size, N = 10,000 images of
// D = 10,000 values, dot, against NumPy's x @ x.T (OpenBLAS syrk).
func BenchmarkAffinityDotVsNumPy(b *testing.B) {
	benchmarkVsPeer(b, 10_000, 10_000, pairwise.MetricDot)
}

// BenchmarkAffinityDot8000VsNumPy: N = 8000 images of D = 4096, dot, the
// whole symmetric matrix (each pair computed once on the packed matrix
// product) against NumPy's x @ x.T (OpenBLAS syrk at its best core).
func BenchmarkAffinityDot8000VsNumPy(b *testing.B) {
	benchmarkVsPeer(b, 8000, 4096, pairwise.MetricDot)
}

// BenchmarkAffinityL1VsSciPy: l1 against scipy's cdist(cityblock), at a
// size scipy finishes in seconds.
func BenchmarkAffinityL1VsSciPy(b *testing.B) { benchmarkVsPeer(b, 1000, 10_000, pairwise.MetricL1) }

// BenchmarkAffinityL1 is l1 at N = 4096, D = 10,000, reporting N²·D per
// second (each pair is computed once, so the kernel itself does half).
func BenchmarkAffinityL1(b *testing.B) { benchmarkAffinityRate(b, 4096, 10_000, pairwise.MetricL1) }

// BenchmarkAffinityL2 is l2 at N = 4096, D = 4096, the whole symmetric
// matrix in float32, reporting N²·D per second (each pair is computed
// once, so the kernel itself does half).
func BenchmarkAffinityL2(b *testing.B) { benchmarkAffinityRate(b, 4096, 4096, pairwise.MetricL2) }

// benchmarkAffinityRate runs metric over n random images of d values and
// reports N²·D per second.
func benchmarkAffinityRate(b *testing.B, n, d int, metric pairwise.Metric) {
	n = shortN(n)
	x := randomImages(n, d)
	var total time.Duration
	for b.Loop() {
		_, t := affinityRun(b, x, n, d, metric)
		total += t
	}
	b.ReportMetric(float64(n)*float64(n)*float64(d)*float64(b.N)/total.Seconds(), "pair-dims/s")
}
