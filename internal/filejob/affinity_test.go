package filejob

import (
	"errors"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/shard"
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
		{"default", defaultAffinitySpec(), ""},
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
			s.Shards, s.Env = intp(4), env("SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_MIN", "3")
		}), ""},
		{"shards SLURM array from 1", small(func(s *AffinitySpec) {
			s.Shards, s.Env = intp(4), env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_MIN", "1")
		}), "--array=0-3"},
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
		{"tf32 on the CPU", AffinitySpec{Config: affinity.Config{TF32: true}, N: 20, Height: 2, Width: 3}, false, "--tf32: needs --device cuda"},
		{"tf32 before top-k", AffinitySpec{Config: affinity.Config{TF32: true, TopK: intp(0)}, N: 20, Height: 2, Width: 3}, false, "--tf32"},
		{"K>=N", AffinitySpec{Config: affinity.Config{TopK: intp(20)}, N: 20, Height: 2, Width: 3}, false, "--topk 20: must be below N = 20 (self is excluded)"},
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
			s := AffinitySpec{Config: affinity.Config{Metric: "l1"}, N: n, Height: h, Width: w, Seed: 1}
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

// defaultAffinitySpec is the built-in case: N = 10,000 standard-normal
// images of 100×100, dot products.
func defaultAffinitySpec() AffinitySpec {
	return AffinitySpec{Config: affinity.Config{Metric: "dot"}, N: 10_000, Height: 100, Width: 100, Seed: 1}
}
