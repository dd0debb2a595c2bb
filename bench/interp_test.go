package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/telemetry"
	"github.com/tapeloop/tapeloop/internal/testutil"
	"github.com/tapeloop/tapeloop/ops"
)

// The original case's case: 300 interpolants, 4096 grid points, 10⁶ queries.
const (
	seedM = 300
	seedG = 4096
	seedN = 1_000_000
)

func seedTable(b *testing.B, r ops.Reduce, meth ops.Method) *ops.InterpTable {
	f := make([]float64, seedM*seedG)
	for j := range seedM {
		for i := range seedG {
			x := float64(i) / (seedG - 1)
			f[j*seedG+i] = x * x
		}
	}
	tab, err := ops.NewInterpTable(f, seedM, seedG, 0, 1.0/(seedG-1), r, meth, tensor.Float32)
	if err != nil {
		b.Fatal(err)
	}
	return tab
}

// sweep runs the whole seed case through a Program once and returns the
// checksum and the wall time.
func sweep(b *testing.B, tab *ops.InterpTable, r ops.Reduce, meth ops.Method, n int) (float64, time.Duration) {
	job, err := interp.New(interp.Setup{Table: tab, Reduce: r, Method: meth, Dtype: tensor.Float32,
		Queries: &filejob.UniformQueries{N: n, Lo: 0, Hi: 1, Seed: 1}})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if _, err := engine.Run(context.Background(), job, engine.RunConfig{MemLimit: 256 << 20}); err != nil {
		b.Fatal(err)
	}
	return job.Sum, time.Since(t0)
}

func benchmarkInterpSeed(b *testing.B, meth ops.Method) {
	tab := seedTable(b, ops.ReduceSumSq, meth)
	b.ReportAllocs()
	for b.Loop() {
		sweep(b, tab, ops.ReduceSumSq, meth, seedN)
	}
	b.ReportMetric(float64(seedM)*seedN*float64(b.N)/b.Elapsed().Seconds(), "evals/s")
}

// BenchmarkInterpSeedGram is the seed case end to end (queries generated,
// planned, compiled, every batch run), sumsq through per-cell Gram tables.
func BenchmarkInterpSeedGram(b *testing.B) { benchmarkInterpSeed(b, ops.MethodAuto) }

// BenchmarkInterpSeedDirect is the same with all M values of every query
// evaluated and reduced.
func BenchmarkInterpSeedDirect(b *testing.B) { benchmarkInterpSeed(b, ops.MethodDirect) }

// BenchmarkInterpVsNumPy times the seed case in tapeloop and in chunked
// NumPy (bench/peers/interp_numpy.py) in the same run, alternating, and
// reports the ratio of the medians. It skips where python3 lacks numpy.
func BenchmarkInterpVsNumPy(b *testing.B) {
	py := testutil.Python(b, "numpy")
	for _, meth := range []ops.Method{ops.MethodAuto, ops.MethodDirect} {
		b.Run(meth.String(), func(b *testing.B) {
			tab := seedTable(b, ops.ReduceSumSq, meth)
			var ours, theirs []float64
			var sumOurs, sumTheirs float64
			for b.Loop() {
				out, err := exec.Command(py, "peers/interp_numpy.py", "--repeat", "1", "--points", strconv.Itoa(seedN)).Output()
				if err != nil {
					b.Fatalf("numpy peer: %v", err)
				}
				var r struct {
					Seconds  float64
					Checksum float64
				}
				if err := json.Unmarshal(out, &r); err != nil {
					b.Fatalf("numpy peer output %q: %v", out, err)
				}
				theirs = append(theirs, r.Seconds)
				sumTheirs = r.Checksum
				var d time.Duration
				sumOurs, d = sweep(b, tab, ops.ReduceSumSq, meth, seedN)
				ours = append(ours, d.Seconds())
			}
			mo, mt := median(ours), median(theirs)
			b.ReportMetric(mo*1e3, "tapeloop-ms")
			b.ReportMetric(mt*1e3, "numpy-ms")
			b.ReportMetric(mt/mo, "speedup")
			// Same semantics, different query streams (NumPy's and Go's
			// generators): the sums agree statistically, not bit for bit.
			if rel := (sumOurs - sumTheirs) / sumTheirs; rel > 0.01 || rel < -0.01 {
				b.Errorf("checksums differ: tapeloop %.6g, numpy %.6g", sumOurs, sumTheirs)
			}
		})
	}
}

func median(x []float64) float64 { return telemetry.Median(x) }

// benchmarkSteadyState runs the job newJob makes through one compiled graph
// in batches of batch items and reports the run's drift (median batch time
// of the last decile over the first; over several runs, -benchtime Nx, the
// median of the runs) and live Go heap growth from the first batch to the
// last (the largest of the runs): flat means ≤ 1.05 and ≤ 1 MiB.
func benchmarkSteadyState(b *testing.B, batch int, newJob func() engine.Job) {
	var drift, growth []float64
	for b.Loop() {
		out, err := engine.Run(context.Background(), newJob(), engine.RunConfig{MemLimit: 1 << 30, Batch: batch})
		if err != nil {
			b.Fatal(err)
		}
		drift = append(drift, out.Summary.Drift)
		growth = append(growth, float64(out.Summary.HeapGrowth))
	}
	b.ReportMetric(median(drift), "drift")
	b.ReportMetric(slices.Max(growth), "heap-growth-B")
}

// BenchmarkInterpBatchVsOp times the batches of `tapeloop interp` on its
// built-in case, of 10⁶ points (batches of 65,536) and of 2²⁵ (batches of
// 1,048,576) (filejob.OpenInterp on the default spec, run on the
// engine's device as the CLI runs it: per batch, the queries generated,
// the graph run, the results consumed) against the op alone on a batch of
// the same queries, alternating: each iteration is one whole run, the
// median of its full batches' times (the engine's own record, from Feed to
// the end of Consume: what the CLI's summary line reports) set against the
// median of as many calls of the op alone. It reports the ratio of the two
// medians, min and median over the iterations ("batch/op-min",
// "batch/op"), and each side's median time per batch.
func BenchmarkInterpBatchVsOp(b *testing.B) {
	for _, points := range []int{1_000_000, 1 << 25} {
		b.Run(fmt.Sprintf("points=%d", points), func(b *testing.B) { benchmarkInterpBatchVsOp(b, points) })
	}
}

func benchmarkInterpBatchVsOp(b *testing.B, points int) {
	spec := filejob.DefaultInterpSpec()
	spec.Points = points
	dev, err := engine.Open(engine.Engine{})
	if err != nil {
		b.Fatal(err)
	}
	tab := seedTable(b, ops.ReduceSumSq, ops.MethodAuto)
	var op *ops.Interp1D
	var x *tensor.Dense
	var ratios, batchMs, opMs []float64
	for b.Loop() {
		t, err := filejob.OpenInterp(spec, dev, false)
		if err != nil {
			b.Fatal(err)
		}
		out, err := dev.Run(context.Background(), t.Job())
		t.Close()
		if err != nil {
			b.Fatal(err)
		}
		batch := out.Plan.Batch
		if op == nil { // the op on the run's first batch of queries
			op = ops.NewInterp1D(tab, ops.ReduceSumSq, ops.MethodAuto, tensor.Float32, batch)
			x = tensor.New(tensor.WithShape(batch), tensor.Of(tensor.Float32))
			dx, _ := spec.Spacing(seedG)
			q := &filejob.UniformQueries{N: batch, Lo: spec.A, Hi: spec.A + (seedG-1)*dx, Seed: spec.Seed}
			if err := q.Read32(x.Data().([]float32), 0); err != nil {
				b.Fatal(err)
			}
		}
		var full, alone []float64
		for k, it := range out.Iterations {
			if (k+1)*batch <= out.Plan.Items {
				full = append(full, it.Seconds)
			}
		}
		for range full {
			t0 := time.Now()
			if _, err := op.Do(x); err != nil {
				b.Fatal(err)
			}
			alone = append(alone, time.Since(t0).Seconds())
		}
		mb, mo := median(full), median(alone)
		batchMs, opMs = append(batchMs, mb*1e3), append(opMs, mo*1e3)
		ratios = append(ratios, mb/mo)
	}
	b.ReportMetric(slices.Min(ratios), "batch/op-min")
	b.ReportMetric(median(ratios), "batch/op")
	b.ReportMetric(median(batchMs), "batch-ms")
	b.ReportMetric(median(opMs), "op-ms")
}
