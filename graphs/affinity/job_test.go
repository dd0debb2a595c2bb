package affinity

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops/pairwise"
)

// testImages is a small float32 image set.
func testImages(t *testing.T, n, d int, metric pairwise.Metric) *pairwise.PairData {
	t.Helper()
	rng := rand.New(rand.NewPCG(71, 72))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	data, err := pairwise.NewPairData(x, n, d, metric)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestAffinityGraph: the graph of each mode is the pipeline, ops in order
// from the index on, and its DOT shows every node.
func TestAffinityGraph(t *testing.T) {
	data := testImages(t, 37, 11, pairwise.MetricL2)
	for _, c := range []struct {
		name string
		cfg  Setup
		want []string // the ops, in the graph's order
	}{
		{"streamed", Setup{}, []string{"input", "*pairwise.Pairwise", "*ops.BatchStats"}},
		{"top-k", Setup{TopK: 4}, []string{"input", "*pairwise.Pairwise", "*pairwise.TopK"}},
		{"symmetric", Setup{Symmetric: true}, []string{"input", "*pairwise.Pairwise", "*pairwise.Mirror"}},
	} {
		c.cfg.Data, c.cfg.Metric = data, pairwise.MetricL2
		job, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		p, err := engine.Compile(job, 8)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range p.Graph().AllNodes() {
			if n.Op() == nil {
				got = append(got, "input")
			} else {
				got = append(got, fmt.Sprintf("%T", n.Op()))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: ops %v, want %v", c.name, got, c.want)
		}
		var dot bytes.Buffer
		if err := engine.WriteDOT(&dot, job.Name(), p.Graph()); err != nil {
			t.Fatal(err)
		}
		if k := strings.Count(dot.String(), "label="); k != len(c.want) {
			t.Errorf("%s: %d nodes in the DOT, want %d:\n%s", c.name, k, len(c.want), dot.String())
		}
		p.Close()
	}
}

// TestAffinityChecksums: each mode's checksum is the float64 sum it
// documents, bit for bit: streamed, each block's Σ (BatchStats's), added
// block by block; symmetric, each row's sum as eight interleaved partial
// sums, added in row order, whatever the blocks; top-k, the kept values
// in row order. The last block is short.
func TestAffinityChecksums(t *testing.T) {
	const n, d, batch = 37, 11, 8
	// Images of magnitudes 2⁻³⁰ to 2³⁰, so that the order of a sum shows
	// in its rounding.
	rng := rand.New(rand.NewPCG(73, 74))
	x := make([]float32, n*d)
	for i := range n {
		scale := math.Ldexp(1, rng.IntN(61)-30)
		for j := range d {
			x[i*d+j] = float32(rng.NormFloat64() * scale)
		}
	}
	data, err := pairwise.NewPairData(x, n, d, pairwise.MetricL1)
	if err != nil {
		t.Fatal(err)
	}
	rows := pairwiseRows(t, data, pairwise.MetricL1)
	runBatch := func(cfg Setup, batch int) *Job {
		cfg.Data, cfg.Metric = data, pairwise.MetricL1
		job, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Run(t.Context(), job, engine.RunConfig{MemLimit: 1 << 30, Batch: batch}); err != nil {
			t.Fatal(err)
		}
		return job
	}
	run := func(cfg Setup) *Job { return runBatch(cfg, batch) }
	// sum8 is cpukern.SumMax's sum written out: eight interleaved partial
	// sums in float64.
	sum8 := func(x []float32) float64 {
		var p [8]float64
		for j, v := range x {
			p[j%8] += float64(v)
		}
		return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
	}
	var streamed, whole float64
	for lo := 0; lo < n; lo += batch {
		blk := rows[lo*n : min(lo+batch, n)*n]
		var s float64
		for r := 0; r < len(blk); r += 2048 { // BatchStats: runs of 2,048 values
			s += sum8(blk[r:min(r+2048, len(blk))])
		}
		streamed += s
	}
	for i := range n {
		whole += sum8(rows[i*n : (i+1)*n])
	}
	if got := run(Setup{}).Checksum; got != streamed {
		t.Errorf("streamed: checksum %v, want %v", got, streamed)
	}
	for _, b := range []int{batch, 5, n} {
		if got := runBatch(Setup{Symmetric: true}, b).Checksum; got != whole {
			t.Errorf("symmetric, blocks of %d: checksum %v, want %v", b, got, whole)
		}
	}
	const k = 3
	job := run(Setup{TopK: k})
	var kept float64
	for i := range n {
		for _, j := range pairwise.TopKRow(rows[i*n:(i+1)*n], i, k, nil) {
			kept += float64(rows[i*n+j])
		}
	}
	if job.Checksum != kept {
		t.Errorf("top-k: checksum %v, want %v", job.Checksum, kept)
	}
}

// pairwiseRows is the whole (N, N) matrix computed a row at a time.
func pairwiseRows(t *testing.T, data *pairwise.PairData, m pairwise.Metric) []float32 {
	t.Helper()
	op := pairwise.NewPairwise(data, m, 2) // the second row index breaks the run: one row computed
	op.RowsFromData = true
	var out []float32
	for i := range data.N {
		v, err := op.Do(tensor.New(tensor.WithBacking([]float64{float64(i), -1})))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Data().([]float32)[:data.N]...)
	}
	return out
}

// TestAffinityReplayDoesNotAllocate: replaying an affinity Program in
// each mode allocates no buffers, only the TapeMachine's and the worker
// pool's bookkeeping, as TestProgramReplayDoesNotAllocate bounds it.
func TestAffinityReplayDoesNotAllocate(t *testing.T) {
	data := testImages(t, 300, 40, pairwise.MetricDot)
	formula := func(src string) *pairwise.PairFormula {
		f, err := formula.Parse(src, formula.Env{Flag: "--formula", Vars: formula.PairVars, Reduce: true})
		if err != nil {
			t.Fatal(err)
		}
		pf, err := pairwise.NewPairFormula(f, data, false)
		if err != nil {
			t.Fatal(err)
		}
		return pf
	}
	perPair, product := formula("-sum(abs(a-b))"), formula("exp(-sum((a-b)^2)/8)")
	for _, c := range []struct {
		name string
		cfg  Setup
	}{{"streamed", Setup{}}, {"top-k", Setup{TopK: 5}}, {"symmetric", Setup{Symmetric: true}},
		{"formula per pair, streamed", Setup{Formula: perPair}},
		{"formula per pair, symmetric", Setup{Formula: perPair, Symmetric: true}},
		{"formula from dot products, streamed", Setup{Formula: product}},
		{"formula from dot products, top-k", Setup{Formula: product, TopK: 5}}} {
		c.cfg.Data, c.cfg.Metric = data, pairwise.MetricDot
		job, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		const batch = 64
		p, err := engine.Compile(job, batch)
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Feed(p.Inputs(), 0, batch); err != nil {
			t.Fatal(err)
		}
		replay := func() {
			if err := p.Pad(batch); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Run(); err != nil {
				t.Fatal(err)
			}
		}
		replay() // the first run allocates the ops' outputs
		allocs := testing.AllocsPerRun(50, replay)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 50
		for range runs {
			replay()
		}
		runtime.ReadMemStats(&after)
		perRun := float64(after.TotalAlloc-before.TotalAlloc) / runs
		t.Logf("%s: %.0f allocations, %.0f bytes per replay", c.name, allocs, perRun)
		if allocs > 64 {
			t.Errorf("%s: %.0f allocations per replay, want ≤ 64", c.name, allocs)
		}
		if perRun > 16<<10 {
			t.Errorf("%s: %.0f bytes allocated per replay, want ≤ 16 KiB", c.name, perRun)
		}
		p.Close()
	}
}
