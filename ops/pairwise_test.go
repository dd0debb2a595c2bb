package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gorgonia.org/tensor"
)

// refAffinity is the definition in float64, one pair at a time.
func refAffinity(x []float64, n, d int, m Metric, i, j int) float64 {
	var dot, ni, nj, l1, l2 float64
	for k := 0; k < d; k++ {
		a, b := x[i*d+k], x[j*d+k]
		dot += a * b
		ni += a * a
		nj += b * b
		l1 += math.Abs(a - b)
		l2 += (a - b) * (a - b)
	}
	switch m {
	case MetricDot:
		return dot
	case MetricCosine:
		return dot / math.Sqrt(ni) / math.Sqrt(nj)
	case MetricL1:
		return -l1
	default:
		return -l2
	}
}

func TestPairwiseMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const n, d, batch = 37, 29, 8
	x64 := make([]float64, n*d)
	for i := range x64 {
		x64[i] = float64(float32(rng.NormFloat64() + 0.2))
	}
	x32 := make([]float32, n*d)
	for i, v := range x64 {
		x32[i] = float32(v)
	}
	for _, m := range []Metric{MetricDot, MetricCosine, MetricL1, MetricL2} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("%v/%v", m, dt), func(t *testing.T) {
				data := pairData(t, dt, x32, x64, n, d, m)
				op := NewPairwise(data, m, batch)
				// Rows 30…36 in a block of 8: the last row is padding (zeros).
				rows := tensor.New(tensor.WithShape(batch, d), tensor.Of(dt))
				for r := 0; r < 7; r++ {
					for k := 0; k < d; k++ {
						rows.SetAt(castTo(dt, x64[(30+r)*d+k]), r, k)
					}
				}
				index := tensor.New(tensor.WithBacking([]float64{30, 31, 32, 33, 34, 35, 36, 0}))
				v, err := op.Do(rows, index)
				if err != nil {
					t.Fatal(err)
				}
				out := v.(*tensor.Dense)
				var num, den float64
				for r := 0; r < 7; r++ {
					for j := 0; j < n; j++ {
						got, _ := out.At(r, j)
						want := refAffinity(x64, n, d, m, 30+r, j)
						g := toF64(got)
						num += (g - want) * (g - want)
						den += want * want
					}
				}
				tol := 1e-6
				if dt == tensor.Float64 {
					tol = 1e-14
				}
				if e := math.Sqrt(num / den); !(e <= tol) {
					t.Errorf("relative error %.3g > %g", e, tol)
				}
				// Upper: columns before the first row index keep their
				// (poisoned) values, the others are recomputed.
				up := NewPairwise(data, m, batch)
				up.Upper = true
				v, _ = up.Do(rows, index)
				blk := v.(*tensor.Dense)
				for r := 0; r < batch; r++ {
					for j := 0; j < n; j++ {
						blk.SetAt(castTo(dt, 777), r, j)
					}
				}
				if _, err := up.Do(rows, index); err != nil {
					t.Fatal(err)
				}
				for r := 0; r < 7; r++ {
					for j := 0; j < n; j++ {
						got, _ := blk.At(r, j)
						g := toF64(got)
						if j < 30 && g != 777 {
							t.Fatalf("upper: (%d, %d) written", r, j)
						}
						if want := refAffinity(x64, n, d, m, 30+r, j); j >= 30 && math.Abs(g-want) > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("upper: (%d, %d) = %v, want %v", r, j, g, want)
						}
					}
				}
			})
		}
	}
}

// pairData prepares the float32 or the float64 images for m.
func pairData(t *testing.T, dt tensor.Dtype, x32 []float32, x64 []float64, n, d int, m Metric) *PairData {
	t.Helper()
	var data *PairData
	var err error
	if dt == tensor.Float32 {
		data, err = NewPairData(x32, n, d, m)
	} else {
		data, err = NewPairData(x64, n, d, m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func castTo(dt tensor.Dtype, v float64) any {
	if dt == tensor.Float32 {
		return float32(v)
	}
	return v
}

func toF64(v any) float64 {
	switch x := v.(type) {
	case float32:
		return float64(x)
	case float64:
		return x
	}
	panic("not a float")
}

func TestPairDataRejects(t *testing.T) {
	if _, err := NewPairData([]float32{1, float32(math.NaN()), 0, 1}, 2, 2, MetricDot); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := NewPairData([]float64{1, 2, 0, 0}, 2, 2, MetricCosine); err == nil {
		t.Error("all-zero image accepted for cosine")
	}
	if _, err := NewPairData([]float64{1, 2, 0, 0}, 2, 2, MetricL1); err != nil {
		t.Errorf("all-zero image refused for l1: %v", err)
	}
}

// refTopK sorts every other column by (value descending, index ascending).
func refTopK(row []float64, self, k int) []int {
	var idx []int
	for j := range row {
		if j != self {
			idx = append(idx, j)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case row[a] > row[b]:
			return -1
		case row[a] < row[b]:
			return 1
		}
		return a - b
	})
	return idx[:k]
}

func TestTopKRowBreaksTiesBySmallerIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for trial := 0; trial < 200; trial++ {
		n := 2 + rng.IntN(60)
		row := make([]float64, n)
		for j := range row {
			row[j] = float64(rng.IntN(5)) // many ties
		}
		self := rng.IntN(n)
		k := 1 + rng.IntN(n-1)
		got := TopKRow(row, self, k, nil)
		if want := refTopK(row, self, k); !slices.Equal(got, want) {
			t.Fatalf("row %v self %d k %d: got %v, want %v", row, self, k, got, want)
		}
	}
}

// TestPairwiseRowsFromData: an index-only op reads its rows from the
// data: blocks that end at N, that are padded (a shard's last block), and
// upper blocks, against the definition; the rows it does not compute, and
// in upper blocks the columns before the first row, keep what they held;
// a bad first index is an error.
func TestPairwiseRowsFromData(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	const n, d, batch = 41, 19, 8
	x64 := make([]float64, n*d)
	x32 := make([]float32, n*d)
	for i := range x64 {
		x64[i] = float64(float32(rng.NormFloat64() + 0.2))
		x32[i] = float32(x64[i])
	}
	for _, m := range []Metric{MetricDot, MetricCosine, MetricL1, MetricL2} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			data := pairData(t, dt, x32, x64, n, d, m)
			for _, c := range []struct {
				name   string
				index  []float64
				rows   int // rows computed
				upper  bool
				wantOK bool
			}{
				{"middle", []float64{5, 6, 7, 8, 9, 10, 11, 12}, 8, false, true},
				{"end of data", []float64{36, 37, 38, 39, 40, 0, 0, 0}, 5, false, true},
				{"padded", []float64{20, 21, 22, 0, 0, 0, 0, 0}, 3, true, true},
				{"upper at 0", []float64{0, 1, 2, 3, 4, 5, 6, 7}, 8, true, true},
				{"negative", []float64{-1, 0, 1, 2, 3, 4, 5, 6}, 0, false, false},
				{"past N", []float64{41, 42, 43, 44, 45, 46, 47, 48}, 0, true, false},
				{"fraction", []float64{2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5}, 0, false, false},
			} {
				op := NewPairwise(data, m, batch)
				op.RowsFromData, op.Upper = true, c.upper
				index := tensor.New(tensor.WithBacking(append([]float64(nil), c.index...)))
				v, err := op.Do(index) // makes the output
				if !c.wantOK {
					if err == nil {
						t.Errorf("%v/%v/%s: no error", m, dt, c.name)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%v/%v/%s: %v", m, dt, c.name, err)
				}
				out := v.(*tensor.Dense)
				for r := range batch {
					for j := range n {
						out.SetAt(castTo(dt, 777), r, j)
					}
				}
				if _, err := op.Do(index); err != nil {
					t.Fatal(err)
				}
				lo := int(c.index[0])
				for r := range batch {
					for j := range n {
						g, _ := out.At(r, j)
						got := toF64(g)
						if r >= c.rows || (c.upper && j < lo) {
							if got != 777 {
								t.Fatalf("%v/%v/%s: (%d, %d) = %v written", m, dt, c.name, r, j, got)
							}
							continue
						}
						if want := refAffinity(x64, n, d, m, lo+r, j); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
							t.Fatalf("%v/%v/%s: (%d, %d) = %v, want %v", m, dt, c.name, r, j, got, want)
						}
					}
				}
			}
		}
	}
}

// BenchmarkTopKSeed: the top 10 of every row of the seed's 10⁴ × 10⁴
// affinity matrix, selected on the host in blocks of 1000 rows, as
// `affinity --topk 10` does on either device (ms/matrix).
func BenchmarkTopKSeed(b *testing.B) {
	const n, batch, k = 10_000, 1000, 10
	rng := rand.New(rand.NewPCG(1, 2))
	blk := normals32(rng, batch*n)
	idx := make([]float64, batch)
	for i := range idx {
		idx[i] = float64(i)
	}
	op := NewTopK(k, n, batch)
	block := tensor.New(tensor.WithShape(batch, n), tensor.WithBacking(blk))
	index := tensor.New(tensor.WithShape(batch), tensor.WithBacking(idx))
	for b.Loop() {
		for range n / batch {
			if _, err := op.Do(block, index); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/matrix")
}

// normals32 is n standard-normal float32s from rng.
func normals32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}
