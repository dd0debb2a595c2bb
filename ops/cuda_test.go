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
)

// BenchmarkInterpCUDASeed: the seed case, 10⁶ queries per launch, M = 300,
// G = 4096, sumsq (Gram path), copies in and out included.
func BenchmarkInterpCUDASeed(b *testing.B) {
	dev := device(b)
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
	dev := device(b)
	const n, rows, cols, batch = 256, 200, 200, 64
	rng := rand.New(rand.NewPCG(35, 36))
	vol := &volume.Volume{N: [3]int64{n, n, n}, Origin: [3]float64{-128, -128, -128}, Spacing: [3]float64{1, 1, 1}}
	vol.V = uniform32(rng, n*n*n)
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

// TestPairwiseCUDAWritesFull: with WriteFull, a symmetric run's blocks
// (the last one short) go straight into the whole matrix, poisoned with
// NaN first: every element written, the matrix exactly symmetric, and
// equal to the CPU's full rows.
func TestPairwiseCUDAWritesFull(t *testing.T) {
	dev := device(t)
	rng := rand.New(rand.NewPCG(43, 44))
	const n, d, batch = 150, 77, 40
	x := normals32(rng, n*d)
	for _, metric := range []Metric{MetricL1, MetricL2, MetricDot, MetricCosine} {
		data, err := NewPairData(x, n, d, metric)
		if err != nil {
			t.Fatal(err)
		}
		pw := NewPairwise(data, metric, batch)
		pw.Upper, pw.RowsFromData = true, true
		gop, err := OnDevice(pw, dev)
		if err != nil {
			t.Fatal(err)
		}
		op := gop.(*pairwiseCUDA)
		op.chunk = 16
		full := make([]float32, n*n)
		for i := range full {
			full[i] = float32(math.NaN())
		}
		if !op.WriteFull(full) {
			t.Fatal("WriteFull refused a symmetric run")
		}
		ref := NewPairwise(data, metric, batch) // full rows on the CPU
		ref.RowsFromData = true
		var want []float32
		for lo := 0; lo < n; lo += batch {
			idx := make([]float64, batch)
			for i := range idx {
				idx[i] = float64(min(lo+i, n-1))
			}
			in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
			if _, err := op.Do(in); err != nil {
				t.Fatal(err)
			}
			w, err := ref.Do(in)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, w.Data().([]float32)[:min(batch, n-lo)*n]...)
		}
		for i := range n {
			for j := range n {
				if g := full[i*n+j]; g != full[j*n+i] || g != g {
					t.Fatalf("%v: (%d, %d) = %v, (%d, %d) = %v", metric, i, j, g, j, i, full[j*n+i])
				}
			}
		}
		if e := relErr(full, want); !(e <= 1e-5) {
			t.Errorf("%v: relative error %.3g", metric, e)
		}
	}
}

// BenchmarkPairwiseCUDA: the original case's matrix, N = 10,000 images of D =
// 10,000 values, computed as the affinity command does in symmetric mode:
// blocks of 1000 rows read from the resident images, each from its
// diagonal on (the upper triangle), copied straight into the whole (N, N)
// matrix with the transposes of its columns beyond the block, each chunk's
// copy overlapping the next chunk's work (-serial: one chunk, no overlap,
// for comparison; dot-tf32-top10: whole rows, the top 10 of each selected
// on the device, as --topk 10 does). One iteration is
// the whole matrix: s/matrix is the original case's figure (dot with TF32 ≤ 15 ms,
// l1 ≤ 100 ms on an H200).
func BenchmarkPairwiseCUDA(b *testing.B) {
	dev := device(b)
	const n, d, batch = 10_000, 10_000, 1000
	rng := rand.New(rand.NewPCG(39, 40))
	x := normals32(rng, n*d)
	full := make([]float32, n*n) // the matrix the blocks go into, as the command's
	var index []*tensor.Dense
	for lo := 0; lo < n; lo += batch {
		idx := make([]float64, batch)
		for i := range idx {
			idx[i] = float64(lo + i)
		}
		index = append(index, tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx)))
	}
	for _, mc := range []struct {
		name   string
		metric Metric
		tf32   bool
		serial bool // the block in one chunk: its copy back overlaps nothing
		top    int  // --topk: whole rows, the top k selected on the device
	}{{"dot-tf32", MetricDot, true, false, 0}, {"dot-tf32-serial", MetricDot, true, true, 0},
		{"dot", MetricDot, false, false, 0}, {"l1", MetricL1, false, false, 0},
		{"dot-tf32-top10", MetricDot, true, false, 10}} {
		b.Run(mc.name, func(b *testing.B) {
			data, err := NewPairData(x, n, d, mc.metric)
			if err != nil {
				b.Fatal(err)
			}
			pw := NewPairwise(data, mc.metric, batch)
			pw.TF32, pw.Upper, pw.RowsFromData = mc.tf32, mc.top == 0, true
			op, err := OnDevice(pw, dev)
			if err != nil {
				b.Fatal(err)
			}
			if mc.serial {
				op.(*pairwiseCUDA).chunk = batch
			}
			if mc.top > 0 && !op.(*pairwiseCUDA).SelectTopK(mc.top) || mc.top == 0 && !op.(*pairwiseCUDA).WriteFull(full) {
				b.Fatal("SelectTopK or WriteFull refused")
			}
			if _, err := op.Do(index[0]); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				for _, idx := range index { // each Do waits for its copy back
					if _, err := op.Do(idx); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/matrix")
			pairs := float64(n) * float64(n+batch) / 2 // the upper triangle, diagonal blocks whole
			if mc.top > 0 {
				pairs = float64(n) * n
			}
			b.ReportMetric(pairs*d*float64(b.N)/b.Elapsed().Seconds(), "pair-dims/s")
		})
	}
}

// BenchmarkWaveletCUDA200: 200³, wrap, ξ ∈ {1, 2, 4} at random
// orientations, one combination per Do; s/combination as reported.
func BenchmarkWaveletCUDA200(b *testing.B) {
	dev := device(b)
	const n = 200
	rng := rand.New(rand.NewPCG(43, 44))
	v := normals32(rng, n*n*n)
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
