package affinity

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

// BenchmarkAffinityProgram64x1024 is one call of a compiled dot-product
// affinity of 64 float32 images of 1024 values, the matrix written into
// the caller's array: the Go side of bench/python_inproc.py's per-call
// overhead row, which makes the same calls through the Python package
// (tapeloop.Affinity(shape=(64, 1024)) with out=) and compares the two.
// The program is compiled as the C ABI compiles it for that object
// (no top-k or column images: the block planned under the default memory
// limit),
// outside the timed loop. Besides ns/op (the mean) it reports the median
// call as median-ns/call, each call timed on its own: on a shared machine
// the median is the figure other tenants' bursts move least.
func BenchmarkAffinityProgram64x1024(b *testing.B) {
	p, x := affinity64x1024(b)
	dst := make([]float32, p.OutLen())
	if err := p.Run(x, nil, dst, nil, nil); err != nil { // what the first call pays, outside the loop
		b.Fatal(err)
	}
	each := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		if err := p.Run(x, nil, dst, nil, nil); err != nil {
			b.Fatal(err)
		}
		if len(each) < cap(each) {
			each = append(each, time.Since(t))
		}
	}
	slices.Sort(each)
	b.ReportMetric(float64(each[len(each)/2].Nanoseconds()), "median-ns/call")
}

// BenchmarkAffinityReload64x1024 is the part of each call above that the
// program's Report does not time: copying the caller's images into the
// program's buffers (checked for NaN and Inf, their norms recomputed),
// which Run does before the timed replay. bench/python_inproc.py quotes it
// beside the Report's per-call median.
func BenchmarkAffinityReload64x1024(b *testing.B) {
	p, x := affinity64x1024(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.data.ReloadRows(x, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// affinity64x1024 compiles the benchmarks' affinity, closed when b ends,
// and makes its standard-normal images.
func affinity64x1024(b *testing.B) (*Program, []float32) {
	const n, d = 64, 1024
	p, err := Compile(Config{Metric: "dot"}, n, d, 0, workloadtest.CPU(b, 0, "float32"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return p, x
}
