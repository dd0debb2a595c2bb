package pairwise

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops/internal/opstest"
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
		return dot / (math.Sqrt(ni) * math.Sqrt(nj))
	case MetricL1:
		return -l1
	default:
		return -l2
	}
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

// BenchmarkTopKSeed: the top 10 of every row of the original case's 10⁴ × 10⁴
// affinity matrix, selected on the host in blocks of 1000 rows, as
// `affinity --topk 10` does on either device (ms/matrix).
func BenchmarkTopKSeed(b *testing.B) {
	const n, batch, k = 10_000, 1000, 10
	rng := rand.New(rand.NewPCG(1, 2))
	blk := opstest.Normals32(rng, batch*n)
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

// TestReloadRefusesNonFinite: Reload finds a NaN or ±Inf anywhere (every
// position of a block, with and without the norms cosine and l2 keep) and
// names its image and value; the images are then left as they were.
func TestReloadRefusesNonFinite(t *testing.T) {
	const n, d = 5, 77 // 385 values: a whole block of the check and a part
	for _, metric := range []Metric{MetricDot, MetricCosine, MetricL2} {
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(i%13) - 6.5
		}
		p, err := NewPairData(append([]float32(nil), x...), n, d, metric)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			for _, at := range []int{0, 3, 255, 256, 300, n*d - 1} {
				y := append([]float32(nil), x...)
				y[at] = bad
				err := p.Reload(y)
				want := fmt.Sprintf("image %d, value %d is %g", at/d, at%d, bad)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("%v, %g at %d: %v, want %q", metric, bad, at, err, want)
				}
			}
		}
		if err := p.Reload(x); err != nil {
			t.Fatalf("%v: finite images: %v", metric, err)
		}
	}
}

// TestCountRowCountsTheMatrixsEntries: a row of a block computed from
// column c0 on (the block's first row), with upper, stands for its values
// right of the diagonal twice (mirrored), the diagonal once, and the
// values left of the diagonal not at all (the mirror overwrites them);
// without upper, for every value once.
func TestCountRowCountsTheMatrixsEntries(t *testing.T) {
	nan := math.NaN()
	row := []float64{nan, 1, nan, nan, 2, math.Inf(1), 3} // columns 10…16
	const c0 = 10
	for _, c := range []struct {
		img   int
		upper bool
		want  int64
	}{
		{10, true, 2*3 + 1}, // the diagonal is column 10, NaN; 3 right of it
		{11, true, 2 * 3},   // column 11 finite; 10 is left of it
		{12, true, 2*2 + 1}, // 13 and 15 right of it; 12 itself
		{16, true, 0},       // only the diagonal, 3
		{15, true, 1},       // the diagonal, +Inf
		{12, false, 4},
	} {
		if got := countRow(row, c0, c.img, c.upper); got != c.want {
			t.Errorf("image %d, upper %v: %d, want %d", c.img, c.upper, got, c.want)
		}
	}
}
