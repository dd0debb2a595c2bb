package graphs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/ops"
)

func intp(v int) *int       { return &v }
func strp(v string) *string { return &v }

// env is a scheduler environment for AffinitySpec.Env.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestAffinitySpecValidate(t *testing.T) {
	small := func(f func(*AffinitySpec)) AffinitySpec {
		s := AffinitySpec{N: 20, Height: 2, Width: 3, Seed: 1, Env: env()}
		f(&s)
		return s
	}
	cases := []struct {
		name string
		spec AffinitySpec
		want string // "": valid
	}{
		{"default", DefaultAffinitySpec(), ""},
		{"small", small(func(*AffinitySpec) {}), ""},
		{"every metric", small(func(s *AffinitySpec) { s.Metric = "cosine" }), ""},
		{"metric", small(func(s *AffinitySpec) { s.Metric = "l3" }), `--metric: unknown metric "l3"`},
		{"N<1", small(func(s *AffinitySpec) { s.N = 0 }), "--n 0 --height 2 --width 3: each must be at least 1"},
		{"W<1", small(func(s *AffinitySpec) { s.Width = -1 }), "--n 20 --height 2 --width -1: each must be at least 1"},
		{"too many values", small(func(s *AffinitySpec) { s.N, s.Height, s.Width = 1<<20, 1<<10, 1<<5 }), "too many values for the built-in images"},
		{"sizes ignored with images", small(func(s *AffinitySpec) { s.Images, s.N = "x.npy", 0 }), ""},
		{"K<1", small(func(s *AffinitySpec) { s.TopK = intp(0) }), "--topk 0: must be at least 1"},
		{"K negative", small(func(s *AffinitySpec) { s.TopK = intp(-2) }), "--topk -2: must be at least 1"},
		{"K", small(func(s *AffinitySpec) { s.TopK = intp(5) }), ""},
		{"block", small(func(s *AffinitySpec) { s.Block = intp(0) }), "--block 0: must be at least 1"},
		{"block first", small(func(s *AffinitySpec) { s.Block, s.TopK = intp(-1), intp(0) }), "--block -1"},
		{"metric first", small(func(s *AffinitySpec) { s.Metric, s.Block = "x", intp(0) }), "--metric"},
		{"shard", small(func(s *AffinitySpec) { s.Shard = strp("2/3") }), ""},
		{"shard syntax", small(func(s *AffinitySpec) { s.Shard = strp("1") }), `--shard: shard: "1" is not i/n`},
		{"shard range", small(func(s *AffinitySpec) { s.Shard = strp("3/3") }), `"3/3" is not i/n`},
		{"shard empty", small(func(s *AffinitySpec) { s.Shard = strp("") }), `"" is not i/n`},
		{"shard and shards", small(func(s *AffinitySpec) { s.Shard, s.Shards = strp("0/2"), intp(2) }), "--shard and --shards: give one"},
		{"shards no env", small(func(s *AffinitySpec) { s.Shards = intp(4) }), "--shards: shard: --shards needs SLURM_ARRAY_TASK_ID"},
		{"shards 0", small(func(s *AffinitySpec) { s.Shards = intp(0) }), "--shards 0: need at least 1"},
		{"shards SLURM", small(func(s *AffinitySpec) {
			s.Shards, s.Env = intp(4), env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_MIN", "1")
		}), ""},
		{"shards SLURM out of range", small(func(s *AffinitySpec) { s.Shards, s.Env = intp(4), env("SLURM_ARRAY_TASK_ID", "4") }), "outside 0…3"},
		{"shards Kubernetes", small(func(s *AffinitySpec) { s.Shards, s.Env = intp(3), env("JOB_COMPLETION_INDEX", "2") }), ""},
		{"shards bad env", small(func(s *AffinitySpec) { s.Shards, s.Env = intp(3), env("JOB_COMPLETION_INDEX", "x") }), "is not an integer"},
	}
	for _, c := range cases {
		err := c.spec.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
}

func TestMergeSpecValidate(t *testing.T) {
	if err := (MergeSpec{Out: "m.npy", Shards: []string{"a.npz"}}).Validate(); err != nil {
		t.Error(err)
	}
	if err := (MergeSpec{Out: "m.npy"}).Validate(); err == nil || !errors.Is(err, shard.ErrShards) || !strings.Contains(err.Error(), "no shard files given") {
		t.Errorf("no shards: %v", err)
	}
	if err := (MergeSpec{Shards: []string{"a.npz"}}).Validate(); err == nil || !strings.Contains(err.Error(), "--out") {
		t.Errorf("no output: %v", err)
	}
}

// cpuDevice is the CPU under limit bytes.
func cpuDevice(t *testing.T, limit int64, dtype string) *engine.Device {
	t.Helper()
	d, err := engine.Open(engine.Engine{MemLimit: limit, Dtype: dtype})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestOpenAffinityRules: the rules that need the device or the images.
func TestOpenAffinityRules(t *testing.T) {
	dev := cpuDevice(t, 1<<30, "")
	for _, c := range []struct {
		name string
		spec AffinitySpec
		out  bool
		want string
	}{
		{"tf32 on the CPU", AffinitySpec{N: 20, Height: 2, Width: 3, TF32: true}, false, "--tf32: needs --device cuda"},
		{"tf32 before top-k", AffinitySpec{N: 20, Height: 2, Width: 3, TF32: true, TopK: intp(0)}, false, "--tf32"},
		{"K>=N", AffinitySpec{N: 20, Height: 2, Width: 3, TopK: intp(20)}, false, "--topk 20: must be below N = 20 (self is excluded)"},
		{"shard without rows", AffinitySpec{N: 2, Height: 2, Width: 3, Shard: strp("0/3")}, false, "--shard 0/3: no rows (N = 2 is smaller than the shard count)"},
		{"shard needs out", AffinitySpec{N: 20, Height: 2, Width: 3, Shard: strp("0/3")}, true, "--shard: a shard needs --out FILE.npz"},
		{"missing images", AffinitySpec{Images: "/nonexistent/x.npy"}, false, "--images:"},
	} {
		_, err := OpenAffinity(c.spec, dev, c.out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		}
	}
	// A shard without --out is fine for printing its graph.
	tk, err := OpenAffinity(AffinitySpec{N: 20, Height: 2, Width: 3, Shard: strp("0/3")}, dev, false)
	if err != nil {
		t.Fatal(err)
	}
	tk.Close()
}

// TestOpenAffinityModes: the whole matrix is held when it fits the
// device's limit beside the images and a block of 64 rows, and rows are
// streamed otherwise, for top-k, for a shard and when asked; Block sets
// the task's batch.
func TestOpenAffinityModes(t *testing.T) {
	const n, h, w = 50, 2, 3
	for _, dt := range []struct {
		name string
		size int64
	}{{"float32", 4}, {"float64", 8}} {
		need := dt.size*(n*n+64*(n+h*w)) + dt.size*n*h*w // the matrix, a block, the images
		for _, c := range []struct {
			name      string
			limit     int64
			f         func(*AffinitySpec)
			symmetric bool
		}{
			{"fits", need, func(*AffinitySpec) {}, true},
			{"one byte short", need - 1, func(*AffinitySpec) {}, false},
			{"streamed", need, func(s *AffinitySpec) { s.Streamed = true }, false},
			{"top-k", need, func(s *AffinitySpec) { s.TopK = intp(3) }, false},
			{"shard", need, func(s *AffinitySpec) { s.Shard = strp("0/1") }, false},
		} {
			s := AffinitySpec{N: n, Height: h, Width: w, Seed: 1, Metric: "l1"}
			c.f(&s)
			tk, err := OpenAffinity(s, cpuDevice(t, c.limit, dt.name), false)
			if err != nil {
				t.Fatalf("%s/%s: %v", dt.name, c.name, err)
			}
			if got := tk.Summary().Symmetric; got != c.symmetric {
				t.Errorf("%s/%s: symmetric %v, want %v", dt.name, c.name, got, c.symmetric)
			}
			if tk.Device().RunConfig().Batch != 0 {
				t.Errorf("%s/%s: batch %d without Block", dt.name, c.name, tk.Device().RunConfig().Batch)
			}
			tk.Close()
		}
	}
	dev := cpuDevice(t, 1<<30, "")
	tk, err := OpenAffinity(AffinitySpec{N: n, Height: h, Width: w, Block: intp(7)}, dev, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if b := tk.Device().RunConfig().Batch; b != 7 || dev.RunConfig().Batch != 0 {
		t.Errorf("Block 7: the task's batch %d, the given device's %d", b, dev.RunConfig().Batch)
	}
}

// testImages is a small float32 image set.
func testImages(t *testing.T, n, d int, metric ops.Metric) *ops.PairData {
	t.Helper()
	rng := rand.New(rand.NewPCG(71, 72))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	data, err := ops.NewPairData(x, n, d, metric)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestAffinityGraph: the graph of each mode is the pipeline, ops in order
// from the index on, and its DOT shows every node.
func TestAffinityGraph(t *testing.T) {
	data := testImages(t, 37, 11, ops.MetricL2)
	for _, c := range []struct {
		name string
		cfg  AffinityConfig
		want []string // the ops, in the graph's order
	}{
		{"streamed", AffinityConfig{}, []string{"input", "*ops.Pairwise", "*ops.BatchStats"}},
		{"top-k", AffinityConfig{TopK: 4}, []string{"input", "*ops.Pairwise", "*ops.TopK"}},
		{"symmetric", AffinityConfig{Symmetric: true}, []string{"input", "*ops.Pairwise", "*ops.Mirror"}},
	} {
		c.cfg.Data, c.cfg.Metric = data, ops.MetricL2
		job, err := NewAffinity(c.cfg)
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
// documents, bit for bit: streamed, each block's Σ in row order, added
// block by block; symmetric, the whole matrix in row order; top-k, the
// kept values in row order. The last block is short.
func TestAffinityChecksums(t *testing.T) {
	const n, d, batch = 37, 11, 8
	data := testImages(t, n, d, ops.MetricL1)
	rows := pairwiseRows(t, data, ops.MetricL1)
	run := func(cfg AffinityConfig) *Affinity {
		cfg.Data, cfg.Metric = data, ops.MetricL1
		job, err := NewAffinity(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Run(t.Context(), job, engine.RunConfig{MemLimit: 1 << 30, Batch: batch}); err != nil {
			t.Fatal(err)
		}
		return job
	}
	var streamed, whole float64
	for lo := 0; lo < n; lo += batch {
		var s float64
		for _, v := range rows[lo*n : min(lo+batch, n)*n] {
			s += float64(v)
		}
		streamed += s
	}
	for _, v := range rows {
		whole += float64(v)
	}
	if got := run(AffinityConfig{}).Checksum; got != streamed {
		t.Errorf("streamed: checksum %v, want %v", got, streamed)
	}
	if got := run(AffinityConfig{Symmetric: true}).Checksum; got != whole {
		t.Errorf("symmetric: checksum %v, want %v", got, whole)
	}
	const k = 3
	job := run(AffinityConfig{TopK: k})
	var kept float64
	for i := range n {
		for _, j := range ops.TopKRow(rows[i*n:(i+1)*n], i, k, nil) {
			kept += float64(rows[i*n+j])
		}
	}
	if job.Checksum != kept {
		t.Errorf("top-k: checksum %v, want %v", job.Checksum, kept)
	}
}

// pairwiseRows is the whole (N, N) matrix computed a row at a time.
func pairwiseRows(t *testing.T, data *ops.PairData, m ops.Metric) []float32 {
	t.Helper()
	op := ops.NewPairwise(data, m, 2) // the second row index breaks the run: one row computed
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
	data := testImages(t, 300, 40, ops.MetricDot)
	formula := func(src string) *ops.PairFormula {
		f, err := formula.Parse(src, formula.Env{Flag: "--formula", Vars: formula.PairVars, Reduce: true})
		if err != nil {
			t.Fatal(err)
		}
		pf, err := ops.NewPairFormula(f, data, false)
		if err != nil {
			t.Fatal(err)
		}
		return pf
	}
	perPair, product := formula("-sum(abs(a-b))"), formula("exp(-sum((a-b)^2)/8)")
	for _, c := range []struct {
		name string
		cfg  AffinityConfig
	}{{"streamed", AffinityConfig{}}, {"top-k", AffinityConfig{TopK: 5}}, {"symmetric", AffinityConfig{Symmetric: true}},
		{"formula per pair, streamed", AffinityConfig{Formula: perPair}},
		{"formula per pair, symmetric", AffinityConfig{Formula: perPair, Symmetric: true}},
		{"formula from dot products, streamed", AffinityConfig{Formula: product}},
		{"formula from dot products, top-k", AffinityConfig{Formula: product, TopK: 5}}} {
		c.cfg.Data, c.cfg.Metric = data, ops.MetricDot
		job, err := NewAffinity(c.cfg)
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
