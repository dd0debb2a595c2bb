package pairwise

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// BenchmarkPairwiseL2 is float32 l2 over N = 4096 images of D = 1024
// values, from the images' setup (their check and norms) to the last
// block of 512 rows read from the data: "upper" computes each pair once
// (the in-memory matrix's blocks), "rows" every row whole (streamed rows
// and shards). It reports N²·D per second of the whole run.
func BenchmarkPairwiseL2(b *testing.B) {
	const n, d, batch = 4096, 1024, 512
	x := opstest.Normals32(rand.New(rand.NewPCG(1, 2)), n*d)
	for _, upper := range []bool{true, false} {
		name := "rows"
		if upper {
			name = "upper"
		}
		b.Run(name, func(b *testing.B) {
			index := make([]float64, batch)
			in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(index))
			for b.Loop() {
				data, err := NewPairData(x, n, d, MetricL2)
				if err != nil {
					b.Fatal(err)
				}
				op := NewPairwise(data, MetricL2, batch)
				op.Upper, op.RowsFromData = upper, true
				for lo := 0; lo < n; lo += batch {
					for i := range index {
						index[i] = float64(min(lo+i, n-1))
					}
					if _, err := op.Do(in); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(n)*n*d*float64(b.N)/b.Elapsed().Seconds(), "pair-dims/s")
		})
	}
}

// BenchmarkPairMap is the formula over dot products, exp(−Σ(a−b)²/9)
// (from Σa², Σb² and a·b), over a block of 64 rows of N = 8192 float32
// dot products: "upper" a symmetric run's block (columns from its first
// row on, rows 4096…), "rows" whole rows (streamed rows and shards, rows
// 4096…: half of each row's columns precede its image). It reports pairs
// per second.
func BenchmarkPairMap(b *testing.B) {
	const n, d, batch = 8192, 8, 64
	x := opstest.Normals32(rand.New(rand.NewPCG(1, 2)), n*d)
	data, err := NewPairData(x, n, d, MetricDot)
	if err != nil {
		b.Fatal(err)
	}
	f, err := formula.Parse("exp(-sum((a-b)^2)/9)", formula.Env{Flag: "--formula", Vars: formula.PairVars, Reduce: true})
	if err != nil {
		b.Fatal(err)
	}
	pf, err := NewPairFormula(f, data, false)
	if err != nil {
		b.Fatal(err)
	}
	dots := tensor.New(tensor.WithShape(batch, n), tensor.WithBacking(opstest.Normals32(rand.New(rand.NewPCG(3, 4)), batch*n)))
	index := make([]float64, batch)
	for i := range index {
		index[i] = float64(n/2 + i)
	}
	in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(index))
	for _, upper := range []bool{true, false} {
		name := "rows"
		if upper {
			name = "upper"
		}
		b.Run(name, func(b *testing.B) {
			op := NewPairMap(pf, data, batch)
			op.Upper = upper
			pairs := batch * n
			if upper {
				pairs = batch * n / 2
			}
			for b.Loop() {
				if _, err := op.Do(dots, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(pairs)*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}

// BenchmarkPairwiseCosine64 is float64 cosine over N = 2048 images of
// D = 64 values in blocks of 256 rows, each pair once (upper). It reports
// pairs per second.
func BenchmarkPairwiseCosine64(b *testing.B) {
	const n, d, batch = 2048, 64, 256
	x := opstest.Widen(opstest.Normals32(rand.New(rand.NewPCG(1, 2)), n*d))
	data, err := NewPairData(x, n, d, MetricCosine)
	if err != nil {
		b.Fatal(err)
	}
	index := make([]float64, batch)
	in := tensor.New(tensor.WithShape(batch), tensor.WithBacking(index))
	op := NewPairwise(data, MetricCosine, batch)
	op.Upper, op.RowsFromData = true, true
	for b.Loop() {
		for lo := 0; lo < n; lo += batch {
			for i := range index {
				index[i] = float64(min(lo+i, n-1))
			}
			if _, err := op.Do(in); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)*n/2*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}
