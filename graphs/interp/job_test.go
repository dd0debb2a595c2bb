package interp

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/internal/graphstest"
	"github.com/tapeloop/tapeloop/ops"
)

// sliceQueries are queries held in memory.
type sliceQueries struct{ x []float32 }

func (q *sliceQueries) Len() int { return len(q.x) }
func (q *sliceQueries) Read32(dst []float32, off int) error {
	copy(dst, q.x[off:])
	return nil
}
func (q *sliceQueries) Read64(dst []float64, off int) error {
	for i := range dst {
		dst[i] = float64(q.x[off+i])
	}
	return nil
}

// TestJobSumIsBatchTotals runs a Job through the engine, its BatchStats
// fused into the op, and checks its Sum bit for bit against the plain
// sum: each batch's values, from the op alone, added in order in float64,
// and the batches' totals added in order; batches of several chunks of the
// op and a short last one, sumsq and sum.
func TestJobSumIsBatchTotals(t *testing.T) {
	const m, g, batch, n = 5, 29, 3*2048 + 77, 4*(3*2048+77) - 1001
	rng := rand.New(rand.NewPCG(31, 32))
	f := make([]float64, m*g)
	for i := range f {
		f[i] = 2*rng.Float64() - 1
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(1.1*rng.Float64() - 0.05)
	}
	for _, r := range []ops.Reduce{ops.ReduceSumSq, ops.ReduceSum} {
		tab, err := ops.NewInterpTable(f, m, g, 0, 1.0/(g-1), r, ops.MethodAuto, tensor.Float32)
		if err != nil {
			t.Fatal(err)
		}
		job, err := New(Setup{Table: tab, Reduce: r, Method: ops.MethodAuto, Dtype: tensor.Float32, Queries: &sliceQueries{x}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := graphstest.CPU(t, batch, "float32").Run(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		op := ops.NewInterp1D(tab, r, ops.MethodAuto, tensor.Float32, batch)
		var want float64
		for off := 0; off < n; off += batch {
			in := make([]float32, batch)
			k := copy(in, x[off:])
			y, err := op.Do(tensor.New(tensor.WithShape(batch), tensor.WithBacking(in)))
			if err != nil {
				t.Fatal(err)
			}
			var total float64
			for _, v := range y.Data().([]float32)[:k] {
				total += float64(v)
			}
			want += total
		}
		if math.Float64bits(job.Sum) != math.Float64bits(want) {
			t.Errorf("%v: Sum %.17g, want %.17g", r, job.Sum, want)
		}
	}
}
