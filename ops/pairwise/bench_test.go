package pairwise

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

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
