package interp

import (
	"context"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/workloadtest"
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

// randomCase is m interpolants on g points with values in [−1, 1) and n
// queries over the grid and a little past both ends, from seed.
func randomCase(seed uint64, m, g, n int) (f []float64, x []float32) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	f = make([]float64, m*g)
	for i := range f {
		f[i] = 2*rng.Float64() - 1
	}
	x = make([]float32, n)
	for i := range x {
		x[i] = float32(1.1*rng.Float64() - 0.05)
	}
	return f, x
}

// TestJobSumIsBatchTotals runs a Job through the engine, its BatchStats
// fused into the op, and checks its Sum bit for bit against the plain
// sum: each batch's values, from the op alone, added in order in float64,
// and the batches' totals added in order; batches of several chunks of the
// op and a short last one, sumsq and sum.
func TestJobSumIsBatchTotals(t *testing.T) {
	const m, g, batch, n = 5, 29, 3*2048 + 77, 4*(3*2048+77) - 1001
	f, x := randomCase(31, m, g, n)
	for _, r := range []ops.Reduce{ops.ReduceSumSq, ops.ReduceSum} {
		tab, err := ops.NewInterpTable(f, m, g, 0, 1.0/(g-1), r, ops.MethodAuto, tensor.Float32)
		if err != nil {
			t.Fatal(err)
		}
		job, err := New(Setup{Table: tab, Reduce: r, Method: ops.MethodAuto, Dtype: tensor.Float32, Queries: &sliceQueries{x}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := workloadtest.CPU(t, batch, "float32").Run(context.Background(), job); err != nil {
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

// generatedQueries are queries held in memory offered as Generated: the
// op makes each chunk of them itself (fill counts its calls).
type generatedQueries struct {
	sliceQueries
	pos, base int
	fills     atomic.Int64 // the op's goroutines make chunks at once
}

func (q *generatedQueries) Skip(n int) {
	q.base = q.pos
	q.pos += n
}

func (q *generatedQueries) Fill(x any, lo, hi int) {
	q.fills.Add(1)
	for i := lo; i < hi; i++ {
		v := float32(0.5) // past the end: padding of a short last batch
		if q.base+i < len(q.x) {
			v = q.x[q.base+i]
		}
		switch d := x.(type) {
		case []float32:
			d[i] = v
		case []float64:
			d[i] = float64(v)
		}
	}
}

// collect keeps the results a Job writes.
type collect struct{ v []float64 }

func (c *collect) Write32(v []float32) error {
	for _, x := range v {
		c.v = append(c.v, float64(x))
	}
	return nil
}

func (c *collect) Write64(v []float64) error {
	c.v = append(c.v, v...)
	return nil
}

// TestJobGeneratedQueries: queries the op makes itself, chunk by chunk
// (sumsq and sum on per-cell tables), give the results and the Sum of the
// same queries read before each batch, bit for bit, in float32 and
// float64, batches of several chunks and a short last one; for the other
// reductions the queries are read as before.
func TestJobGeneratedQueries(t *testing.T) {
	const m, g, batch, n = 4, 31, 2*2048 + 333, 3*(2*2048+333) - 517
	f, x := randomCase(41, m, g, n)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, r := range []ops.Reduce{ops.ReduceSumSq, ops.ReduceSum, ops.ReduceNone} {
			run := func(q Queries) (float64, []float64) {
				tab, err := ops.NewInterpTable(f, m, g, 0, 1.0/(g-1), r, ops.MethodAuto, dt)
				if err != nil {
					t.Fatal(err)
				}
				out := &collect{}
				job, err := New(Setup{Table: tab, Reduce: r, Method: ops.MethodAuto, Dtype: dt, Queries: q, Out: out})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := workloadtest.CPU(t, batch, dt.String()).Run(context.Background(), job); err != nil {
					t.Fatal(err)
				}
				return job.Sum, out.v
			}
			wantSum, want := run(&sliceQueries{x})
			gen := &generatedQueries{sliceQueries: sliceQueries{x}}
			gotSum, got := run(gen)
			if fused := r != ops.ReduceNone; fused != (gen.fills.Load() > 0) {
				t.Errorf("%v %v: the op made %d chunks of queries", dt, r, gen.fills.Load())
			}
			if math.Float64bits(gotSum) != math.Float64bits(wantSum) {
				t.Errorf("%v %v: Sum %.17g, want %.17g", dt, r, gotSum, wantSum)
			}
			if len(got) != len(want) {
				t.Fatalf("%v %v: %d results, want %d", dt, r, len(got), len(want))
			}
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%v %v: result %d is %g, want %g", dt, r, i, got[i], want[i])
				}
			}
		}
	}
}
