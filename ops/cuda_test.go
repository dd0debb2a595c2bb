//go:build tapeloop_cuda || tapeloop_cudaemu

package ops

// The GPU twins' own mechanics, and their benchmarks. Their results, case by
// case, are the conformance suites' (conformance_test.go, on the backends
// of backends_cuda_test.go). These need a GPU: build the binary with
// `go test -c -tags tapeloop_cuda ./ops` and run it with
// -test.run 'CUDA|Conformance' -test.bench CUDA (scripts/gpu-check.sh does).

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// BenchmarkInterpCUDASeed: the seed case, 10⁶ queries per launch, M = 300,
// G = 4096, sumsq (Gram path), copies in and out included.
func BenchmarkInterpCUDASeed(b *testing.B) {
	dev := opstest.Device(b)
	const m, g, n = 300, 4096, 1_000_000
	f := make([]float64, m*g)
	for i := range f {
		f[i] = float64(i%g) * float64(i%g) / (g * g)
	}
	tab, err := NewInterpTable(f, m, g, 0, 1.0/(g-1), ReduceSumSq, MethodAuto, tensor.Float32)
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i) / n
	}
	in := tensor.New(tensor.WithShape(n), tensor.WithBacking(x))
	op, err := OnDevice(NewInterp1D(tab, ReduceSumSq, MethodAuto, tensor.Float32, n), dev)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := op.Do(in); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := op.Do(in); err != nil { // synchronised: Launch waits, the copy back blocks
			b.Fatal(err)
		}
	}
}

// BenchmarkDRRCUDA: 256³, 200×200, 64 poses per launch, trilinear at
// 0.5 mm (~500 samples per ray) and Siddon.
func BenchmarkDRRCUDA(b *testing.B) {
	dev := opstest.Device(b)
	const n, rows, cols, batch = 256, 200, 200, 64
	rng := rand.New(rand.NewPCG(35, 36))
	vol := &volume.Volume{N: [3]int64{n, n, n}, Origin: [3]float64{-128, -128, -128}, Spacing: [3]float64{1, 1, 1}}
	vol.V = opstest.Uniform32(rng, n*n*n)
	var poses []float64
	for k := range batch {
		poses = append(poses, orbitPose([3]float64{}, float64(k)*2*math.Pi/batch, 1020, 510, rows, cols, 2)...)
	}
	in := tensor.New(tensor.WithShape(batch, PoseWidth), tensor.WithBacking(poses))
	for _, c := range []struct {
		name string
		step float64
	}{{"trilinear", 0.5}, {"siddon", 0}} {
		b.Run(c.name, func(b *testing.B) {
			op, err := OnDevice(NewDRR(vol, rows, cols, c.step, batch), dev)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := op.Do(in); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := op.Do(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "DRR/s")
		})
	}
}

// BenchmarkWaveletCUDA200: 200³, wrap, ξ ∈ {1, 2, 4} at random
// orientations, one combination per Do; s/combination as reported.
func BenchmarkWaveletCUDA200(b *testing.B) {
	dev := opstest.Device(b)
	const n = 200
	rng := rand.New(rand.NewPCG(43, 44))
	v := opstest.Normals32(rng, n*n*n)
	src, err := NewWaveletSource(v, [3]int{n, n, n}, 1, Wrap, [3]int{})
	if err != nil {
		b.Fatal(err)
	}
	op, err := OnDevice(NewWaveletResponse(src, 1), dev)
	if err != nil {
		b.Fatal(err)
	}
	mom := NewWaveletMoments(src.N, 1)
	params := []float64{0.3, 1.1, 1, 0, 0, 0}
	in := tensor.New(tensor.WithShape(1, WaveletParams), tensor.WithBacking(params))
	stats := func() {
		sums, err := op.Do(in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := mom.Do(sums); err != nil {
			b.Fatal(err)
		}
	}
	stats()
	xis := []float64{1, 2, 4}
	k := 0
	for b.Loop() {
		params[0], params[1], params[2] = rng.Float64()*math.Pi, rng.Float64()*math.Pi, xis[k%3]
		k++
		stats()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/combination")
}
