package pairwise

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// TestConformancePairwiseU8: 8-bit images against the definition
// (refAffinity over the same integers, exact in float64), every metric, in
// float32 and float64 output, every layout of block read from the data:
// dot, l1 and l2 equal to the exact integer rounded once to the output's
// dtype, cosine within a rounding; after the second run the columns
// before an upper block's first row, and a short block's padding rows,
// still hold the mark. A block given as rows is refused, and so is a GPU:
// the 8-bit op runs on the CPU only.
func TestConformancePairwiseU8(t *testing.T) {
	const n, d, batch = 301, 77, 40 // two ranges of columns, D no multiple of 64
	rng := rand.New(rand.NewPCG(81, 82))
	x8 := make([]uint8, n*d)
	x := make([]float64, n*d)
	for i := range x8 {
		x8[i] = uint8(rng.IntN(256))
		x[i] = float64(x8[i])
	}
	opstest.OnEveryBackend(t, backends(t), func(t *testing.T, b backend) {
		for _, m := range []Metric{MetricDot, MetricCosine, MetricL1, MetricL2} {
			ref := refMatrix(x, n, d, m)
			for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
				data, err := NewPairDataU8(x8, n, d, m, dt)
				if err != nil {
					t.Fatal(err)
				}
				if b.Dev != nil {
					t.Run(fmt.Sprintf("%v/%v/refused", m, dt), func(t *testing.T) {
						op := NewPairwiseU8(data, m, batch)
						op.RowsFromData = true
						if o, err := ops.OnDevice(op, b.Dev); err == nil {
							t.Errorf("%s accepted 8-bit images: %v", b.Name, o)
						}
					})
					continue
				}
				for _, c := range pairLayouts(n, batch) {
					if c.chunk != 0 {
						continue // chunks are the GPU metric twin's
					}
					t.Run(fmt.Sprintf("%v/%v/%s", m, dt, c.name), func(t *testing.T) {
						runPairwiseU8Case(t, b, data, ref, m, dt, c)
					})
				}
			}
		}
	})
}

func runPairwiseU8Case(t *testing.T, b backend, data *PairData, ref []float64, m Metric, dt tensor.Dtype, c pairLayout) {
	n, batch := data.N, 40
	op := NewPairwiseU8(data, m, batch)
	op.Upper, op.RowsFromData = c.upper, c.fromData
	in := []G.Value{opstest.DenseOf(tensor.Float64, c.index(batch))}
	if !c.fromData {
		in = append([]G.Value{opstest.DenseOf(dt, make([]float64, batch*data.D), batch, data.D)}, in...)
		if _, err := op.Do(in...); err == nil {
			t.Fatal("a block given as rows accepted")
		}
		return
	}
	if c.refused(t, op, in) {
		return
	}
	c0 := c.firstCol()
	opstest.RunTwice(t, b, op, 777, func(run string, out *tensor.Dense) {
		got := opstest.ValuesOf(out)
		for i := range batch {
			for j := range n {
				g := got[i*n+j]
				if i >= c.rows || j < c0 {
					if run == opstest.SecondRun && g != 777 {
						t.Fatalf("%s: (%d, %d) = %v: written", run, i, j, g)
					}
					continue
				}
				w := ref[(c.lo+i)*n+j]
				if dt == tensor.Float32 {
					w = float64(float32(w))
				}
				if m == MetricCosine {
					tol := 1e-14
					if dt == tensor.Float32 {
						tol = 2e-7
					}
					if math.Abs(g-w) > tol*math.Abs(w) {
						t.Fatalf("%s: (%d, %d) = %v, want %v", run, c.lo+i, j, g, w)
					}
				} else if g != w {
					t.Fatalf("%s: (%d, %d) = %v, want %v exactly", run, c.lo+i, j, g, w)
				}
			}
		}
	}, in...)
}
