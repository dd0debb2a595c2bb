//go:build tapeloop_cuda || tapeloop_cudaemu

package pairwise

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

	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// TestPairwiseCUDAWritesFull: with WriteFull, a symmetric run's blocks
// (the last one short) go straight into the whole matrix, poisoned with
// NaN first: every element written, the matrix exactly symmetric, and
// equal to the CPU's full rows.
func TestPairwiseCUDAWritesFull(t *testing.T) {
	dev := opstest.Device(t)
	rng := rand.New(rand.NewPCG(43, 44))
	const n, d, batch = 150, 77, 40
	x := opstest.Normals32(rng, n*d)
	for _, metric := range []Metric{MetricL1, MetricL2, MetricDot, MetricCosine} {
		data, err := NewPairData(x, n, d, metric)
		if err != nil {
			t.Fatal(err)
		}
		pw := NewPairwise(data, metric, batch)
		pw.Upper, pw.RowsFromData = true, true
		gop, err := ops.OnDevice(pw, dev)
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
		if e := opstest.RelErr(full, want); !(e <= 1e-5) {
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
	dev := opstest.Device(b)
	const n, d, batch = 10_000, 10_000, 1000
	rng := rand.New(rand.NewPCG(39, 40))
	x := opstest.Normals32(rng, n*d)
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
			op, err := ops.OnDevice(pw, dev)
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
