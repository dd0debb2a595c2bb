package main

import (
	"bytes"
	byteorder "encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

// TestAffinityFlagsCoverConfig: every option of affinity.Config has its
// flag, and the flag reaches the option.
func TestAffinityFlagsCoverConfig(t *testing.T) {
	checkFlagsCover(t, affinityCommand, affinity.Config{}, func(c *cli.Context) (any, error) { return affinitySpec(c) }, nil)
}

// TestAffinityMatchesSciPy compares every metric with a float64 NumPy/SciPy
// reference on random uint8 and float32 images, N not a multiple of the block,
// and top-k with the reference's ordering (uint8 dot products are exact
// integers in float32 here, so ties occur and must go to the smaller index).
func TestAffinityMatchesSciPy(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.spatial")
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	script := `
import numpy as np, sys
from scipy.spatial.distance import cdist
d = sys.argv[1]
rng = np.random.default_rng(3003)
u8 = rng.integers(0, 256, size=(203, 4, 4), dtype=np.uint8)
f32 = (rng.standard_normal((157, 300)) + 0.1).astype(np.float32)
np.save(d + "/u8.npy", u8)
np.save(d + "/f32.npy", f32)
for tag, x in (("u8", u8.reshape(len(u8), -1).astype(np.float64)), ("f32", f32.astype(np.float64))):
    dot = x @ x.T
    nrm = np.linalg.norm(x, axis=1)
    ref = {"dot": dot, "cosine": dot / nrm[:, None] / nrm[None, :],
           "l1": -cdist(x, x, "cityblock"), "l2": -cdist(x, x, "sqeuclidean")}
    for m, a in ref.items():
        np.save(d + "/ref_%s_%s.npy" % (tag, m), a)
        k = 7
        idx = np.empty((len(a), k), np.int64)
        for i in range(len(a)):
            cols = np.array([j for j in range(len(a)) if j != i])
            order = np.lexsort((cols, -a[i, cols]))   # value descending, index ascending
            idx[i] = cols[order[:k]]
        np.save(d + "/topk_%s_%s.npy" % (tag, m), idx)
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	for _, tag := range []string{"u8", "f32"} {
		for _, m := range []string{"dot", "cosine", "l1", "l2"} {
			t.Run(tag+"/"+m, func(t *testing.T) {
				_, want, _ := npy.ReadAll64(p("ref_" + tag + "_" + m + ".npy"))
				// Twice: the whole matrix in memory, each pair computed once
				// (the default when it fits), and whole rows streamed to
				// disk (forced by a limit below the matrix's size).
				streamLimit := map[string]string{"u8": "200KiB", "f32": "200KiB"}[tag] // f32.npy is mapped, not counted
				for i, mode := range [][]string{{"--block", "50"}, {"--mem-limit", streamLimit, "--block", "20"}} {
					out := p(fmt.Sprintf("A_%s_%s.npy", tag, m))
					args := append([]string{"affinity", "--quiet", "--images", p(tag + ".npy"), "--metric", m, "--out", out, "--report", out + ".json"}, mode...)
					if _, se, code := run(t, args...); code != 0 {
						t.Fatalf("%v: exit %d: %s", mode, code, se)
					}
					var rep struct{ Result struct{ Symmetric bool } }
					b, _ := os.ReadFile(out + ".json")
					json.Unmarshal(b, &rep)
					if rep.Result.Symmetric != (i == 0) {
						t.Errorf("%v: symmetric mode %v", mode, rep.Result.Symmetric)
					}
					h, got, err := npy.ReadAll64(out)
					if err != nil {
						t.Fatal(err)
					}
					if len(h.Shape) != 2 || h.Shape[0] != h.Shape[1] || len(got) != len(want) || h.Dtype.Name() != "float32" {
						t.Fatalf("output %s %v, want float32 (N, N)", h.Dtype.Name(), h.Shape)
					}
					if e := normRel(got, want); !(e <= 1e-5) {
						t.Errorf("%v: relative error %.3g > 1e-5", mode, e)
					}
				}
				tk := p(fmt.Sprintf("T_%s_%s.npz", tag, m))
				if _, se, code := run(t, "affinity", "--quiet", "--images", p(tag+".npy"), "--metric", m, "--block", "64", "--topk", "7", "--out", tk); code != 0 {
					t.Fatalf("topk: exit %d: %s", code, se)
				}
				z, err := npy.OpenNPZ(tk)
				if err != nil {
					t.Fatal(err)
				}
				defer z.Close()
				r, c, err := z.Open("indices")
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				gotIdx := make([]float64, r.Len())
				r.Read64(gotIdx)
				_, wantIdx, _ := npy.ReadAll64(p("topk_" + tag + "_" + m + ".npy"))
				if r.Dtype.Name() != "int64" || len(gotIdx) != len(wantIdx) {
					t.Fatalf("indices %s %v", r.Dtype.Name(), r.Shape)
				}
				mismatch := 0
				for i := range wantIdx {
					if gotIdx[i] != wantIdx[i] {
						mismatch++
					}
				}
				// The inputs are fixed (seeded), so exact agreement is
				// expected: uint8 dot products are exact integers in
				// float32 (ties occur and go to the smaller index), and the
				// float32 inputs have no near-ties at float32 precision.
				allowed := 0
				t.Logf("%d of %d top-k indices differ from the reference", mismatch, len(wantIdx))
				if mismatch > allowed {
					t.Errorf("%d of %d top-k indices differ from the reference ordering", mismatch, len(wantIdx))
				}
				rv, cv, err := z.Open("values")
				if err != nil {
					t.Fatal(err)
				}
				defer cv.Close()
				if npy.ShapeString(rv.Shape) != npy.ShapeString(r.Shape) {
					t.Errorf("values %v, indices %v", rv.Shape, r.Shape)
				}
			})
		}
	}
}

func normRel(got, want []float64) float64 {
	var num, den float64
	for i := range want {
		num += (got[i] - want[i]) * (got[i] - want[i])
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

// TestAffinityShardsMergeBitForBit runs three shards, merges them, and
// compares with the single run byte for byte; merge must refuse a missing,
// duplicated or foreign shard and leave no output.
func TestAffinityShardsMergeBitForBit(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	mustRun := func(args ...string) {
		t.Helper()
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, se)
		}
	}
	for _, m := range []string{"dot", "cosine", "l2"} {
		c := []string{"affinity", "--quiet", "--n", "301", "--height", "9", "--width", "11", "--metric", m, "--block", "40"}
		mustRun(append(c, "--out", p(m+".npy"))...)
		for i := range 4 {
			mustRun(append(c, "--shard", fmt.Sprintf("%d/4", i), "--out", p(fmt.Sprintf("%s%d.npz", m, i)))...)
		}
		mustRun("merge", "--out", p(m+"-merged.npy"), p(m+"0.npz"), p(m+"1.npz"), p(m+"2.npz"), p(m+"3.npz"))
		a, _ := os.ReadFile(p(m + ".npy"))
		b, _ := os.ReadFile(p(m + "-merged.npy"))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: merged shards differ from the single run", m)
		}
	}
	// Top-k: the merged archive is the single run's, meta.json included,
	// and is itself a whole run that merges again into the same bytes.
	for _, c := range [][]string{
		{"affinity", "--quiet", "--n", "233", "--height", "7", "--width", "5", "--metric", "cosine", "--block", "30", "--topk", "6"},
		{"affinity", "--quiet", "--n", "97", "--height", "5", "--width", "3", "--metric", "l1", "--dtype", "float64", "--topk", "9"},
	} {
		name := c[len(c)-1] + c[9]
		mustRun(append(c, "--out", p(name+".npz"))...)
		var shards []string
		for i := range 3 {
			shards = append(shards, p(fmt.Sprintf("%s-%d.npz", name, i)))
			mustRun(append(c, "--shard", fmt.Sprintf("%d/3", i), "--out", shards[i])...)
		}
		mustRun(append([]string{"merge", "--out", p(name + "-merged.npz")}, shards[2], shards[0], shards[1])...)
		mustRun("merge", "--out", p(name+"-again.npz"), p(name+"-merged.npz"))
		a, _ := os.ReadFile(p(name + ".npz"))
		for _, m := range []string{"-merged.npz", "-again.npz"} {
			if b, _ := os.ReadFile(p(name + m)); len(a) == 0 || !bytes.Equal(a, b) {
				t.Errorf("top-k %s: %s differs from the single run's archive", name, m)
			}
		}
	}
	common := []string{"affinity", "--quiet", "--n", "301", "--height", "9", "--width", "11", "--metric", "l1", "--block", "40"}
	mustRun(append(common, "--out", p("whole.npy"))...)
	for i := range 3 {
		mustRun(append(common, "--shard", fmt.Sprintf("%d/3", i), "--out", p(fmt.Sprintf("s%d.npz", i)))...)
	}
	mustRun("merge", "--out", p("merged.npy"), p("s2.npz"), p("s0.npz"), p("s1.npz"))
	a, _ := os.ReadFile(p("whole.npy"))
	b, _ := os.ReadFile(p("merged.npy"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("merged shards (%d bytes) differ from the single run (%d bytes)", len(b), len(a))
	}
	// Shards from the scheduler's environment, as in a SLURM array: task
	// 1 resubmitted on its own (--array=1) is shard 1.
	cmd := exec.Command(binary, append(common, "--shards", "3", "--out", p("env1.npz"))...)
	cmd.Env = append(os.Environ(), "SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_TASK_MIN=1", "SLURM_ARRAY_TASK_COUNT=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("--shards with SLURM env: %v %s", err, out)
	}
	mustRun("merge", "--out", p("merged2.npy"), p("s0.npz"), p("env1.npz"), p("s2.npz"))
	if b, _ := os.ReadFile(p("merged2.npy")); !bytes.Equal(a, b) {
		t.Error("merge with the SLURM shard differs")
	}
	// A foreign shard: other images (seed), same shapes.
	mustRun(append(common, "--seed", "9", "--shard", "1/3", "--out", p("foreign.npz"))...)
	// A shard of a different split that overlaps.
	mustRun(append(common, "--shard", "1/2", "--out", p("half.npz"))...)
	for _, c := range []struct {
		name   string
		shards []string
		want   string
	}{
		{"missing", []string{"s0.npz", "s2.npz"}, "missing"},
		{"duplicate", []string{"s0.npz", "s1.npz", "s1.npz", "s2.npz"}, "same rows"},
		{"foreign", []string{"s0.npz", "foreign.npz", "s2.npz"}, "different run"},
		{"overlap", []string{"s0.npz", "s1.npz", "half.npz"}, "overlaps"},
		{"not a shard", []string{"whole.npy"}, "shard files are .npz archives"},
	} {
		var args []string
		for _, s := range c.shards {
			args = append(args, p(s))
		}
		out := p("bad-" + c.name + ".npy")
		_, se, code := run(t, append([]string{"merge", "--out", out}, args...)...)
		if code != 1 || !strings.Contains(se, c.want) || strings.Count(strings.TrimSpace(se), "\n") > 0 {
			t.Errorf("%s: exit %d, stderr %q; want 1 and one line with %q", c.name, code, se, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: output written", c.name)
		}
	}
}

// TestAffinityMemory: N = 6000 images of 64×64 float32 under a 400 MiB
// limit stay under 450 MiB peak RSS, the (N, N) matrix streamed to disk.
func TestAffinityMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("large run")
	}
	dir := t.TempDir()
	rep := filepath.Join(dir, "r.json")
	_, se, code := run(t, "affinity", "--quiet", "--n", "6000", "--height", "64", "--width", "64", "--metric", "dot",
		"--mem-limit", "400MiB", "--out", filepath.Join(dir, "A.npy"), "--report", rep)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	var r struct {
		Batch   int   `json:"batch"`
		PeakRSS int64 `json:"peak_rss_bytes"`
		Planned int64 `json:"planned_bytes"`
	}
	b, _ := os.ReadFile(rep)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("batch %d, planned %.0f MiB, peak RSS %.0f MiB", r.Batch, float64(r.Planned)/(1<<20), float64(r.PeakRSS)/(1<<20))
	if r.PeakRSS > 450<<20 || r.Planned > 400<<20 {
		t.Errorf("peak RSS %d B (want ≤ 450 MiB), planned %d B (want ≤ 400 MiB)", r.PeakRSS, r.Planned)
	}
	if st, err := os.Stat(filepath.Join(dir, "A.npy")); err != nil || st.Size() < 6000*6000*4 {
		t.Errorf("output: %v", err)
	}
}

func TestAffinityBadInput(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	writeNpy(t, p("vec.npy"), []int{10}, make([]float64, 10))
	writeNpy(t, p("nan.npy"), []int{3, 2}, []float64{1, 2, 3, math.NaN(), 5, 6})
	writeNpy(t, p("inf.npy"), []int{3, 1, 2}, []float64{1, 2, 3, 4, math.Inf(-1), 6})
	writeNpy(t, p("zero.npy"), []int{3, 2}, []float64{1, 2, 0, 0, 5, 6})
	writeNpy(t, p("empty.npy"), []int{0, 4}, nil)
	small := []string{"--n", "20", "--height", "2", "--width", "3"}
	// The rules on the flags alone are AffinitySpec's, tested in internal/filejob;
	// here, a few of them reach the user as one line, and the images'.
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"rank", []string{"--images", p("vec.npy")}, "want (N, H, W) or (N, D)"},
		{"empty", []string{"--images", p("empty.npy")}, "no images"},
		{"NaN", []string{"--images", p("nan.npy")}, "image 1"},
		{"Inf", []string{"--images", p("inf.npy")}, "image 2"},
		{"zero cosine", []string{"--images", p("zero.npy"), "--metric", "cosine"}, "image 1 is all zeros"},
		{"metric", append([]string{"--metric", "l3"}, small...), `"l3"`},
		{"K>=N", append([]string{"--topk", "20"}, small...), "--topk 20"},
		{"K<1", append([]string{"--topk", "0"}, small...), "--topk 0"},
		{"shard no env", append([]string{"--shards", "4"}, small...), "SLURM_ARRAY_TASK_ID"},
		{"tf32 on the CPU", append([]string{"--tf32"}, small...), "--tf32: needs --device cuda"},
		{"missing file", []string{"--images", p("none.npy")}, "none.npy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := p("out-" + strings.ReplaceAll(c.name, " ", "_") + ".npz")
			cmd := exec.Command(binary, append([]string{"affinity", "--quiet", "--out", out}, c.args...)...)
			cmd.Env = filterEnv(os.Environ(), "SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX")
			var se bytes.Buffer
			cmd.Stderr = &se
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			msg := se.String()
			if code != 1 || !strings.HasPrefix(msg, "tapeloop: ") || strings.Count(strings.TrimSpace(msg), "\n") > 0 {
				t.Errorf("exit %d, stderr %q; want 1 and one line", code, msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not mention %q", msg, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("partial output left")
			}
		})
	}
}

// TestAffinityNonFiniteNamedInEveryMode: a NaN or ±Inf in a float32
// image stops the run with the one line a scan of the images gives, the
// first such value in image order, in every mode: the symmetric matrix and
// the streamed rows (whose float32 dot products check each block's rows
// as they pack them), top-k, l1 and a shard (scanned up front). Two
// values per file, the later one in an earlier block where they differ,
// anywhere from the first image to the last; no output is left.
func TestAffinityNonFiniteNamedInEveryMode(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	const n, d = 523, 77
	rng := rand.New(rand.NewPCG(71, 72))
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	modes := [][]string{
		{"--block", "100", "--out", p("o.npy")},                       // symmetric, 6 blocks
		{"--block", "64", "--mem-limit", "1MiB", "--out", p("o.npy")}, // the matrix does not fit: streamed rows
		{"--block", "100", "--topk", "5", "--out", p("o.npz")},        // top-k
		{"--metric", "l1", "--block", "100", "--out", p("o.npy")},     // scanned up front
		{"--shard", "2/3", "--block", "100", "--out", p("o.npz")},     // a shard: scanned up front
	}
	for trial := range 8 {
		x := make([]float64, n*d)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		var at []int
		switch trial {
		case 0:
			at = []int{0, (n - 1) * d} // the first value of the first image, and the last image
		case 1:
			at = []int{n*d - 1, (n-1)*d + 3} // both in the last image
		default:
			at = []int{rng.IntN(n * d), rng.IntN(n * d)}
		}
		for i, a := range at {
			x[a] = bad[(trial+i)%3]
		}
		first := min(at[0], at[1])
		want := fmt.Sprintf("tapeloop: affinity: image %d, value %d is %g\n", first/d, first%d, x[first])
		f, err := os.Create(p("x.npy"))
		if err != nil {
			t.Fatal(err)
		}
		w, err := npy.NewWriter(f, npy.Float32, []int{n, d})
		if err == nil {
			err = w.Write64(x)
		}
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range modes {
			args := append([]string{"affinity", "--quiet", "--images", p("x.npy")}, mode...)
			_, stderr, code := run(t, args...)
			if code != 1 || stderr != want {
				t.Errorf("trial %d: tapeloop %s: exit %d, stderr %q; want 1, %q", trial, strings.Join(args[4:], " "), code, stderr, want)
			}
			for _, out := range []string{p("o.npy"), p("o.npz")} {
				if _, err := os.Stat(out); err == nil {
					t.Fatalf("trial %d: tapeloop %s left %s", trial, strings.Join(args[4:], " "), out)
				}
			}
		}
	}
}

// TestAffinityReportPhases: --report's result holds where the run's wall
// time went, --verbose prints it: each phase present and non-negative,
// together no more than the run's wall time (and all of it: the phases
// follow each other), which is itself within the time the test measured
// around the process; the check is fused into the matrix product for
// float32 dot products on AVX-512 and timed on its own otherwise.
func TestAffinityReportPhases(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	rng := rand.New(rand.NewPCG(73, 74))
	x := make([]float64, 611*203)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	writeNpy(t, p("x.npy"), []int{611, 203}, x)
	for _, c := range []struct {
		args  []string
		fused bool
	}{
		{[]string{"--metric", "dot", "--out", p("a.npy")}, cpukern.GEMM()},
		{[]string{"--metric", "dot", "--out", p("a.npy")}, cpukern.GEMM()}, // over the first run's output
		{[]string{"--metric", "l1", "--out", p("b.npy")}, false},
		{[]string{"--metric", "cosine", "--topk", "3", "--out", p("c.npz")}, false},
		{[]string{"--metric", "dot", "--shard", "0/2", "--out", p("s.npz")}, false},
		{[]string{"--metric", "dot"}, cpukern.GEMM()}, // no output
	} {
		args := append([]string{"affinity", "--images", p("x.npy"), "--report", p("r.json"), "--verbose"}, c.args...)
		began := time.Now()
		_, stderr, code := run(t, args...)
		outside := time.Since(began).Seconds()
		if code != 0 {
			t.Fatalf("tapeloop %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		raw, err := os.ReadFile(p("r.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Result struct {
				Phases map[string]any `json:"phases"`
			} `json:"result"`
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatal(err)
		}
		ph := rep.Result.Phases
		var sum float64
		for _, k := range []string{"startup_seconds", "read_seconds", "check_seconds", "compute_seconds", "write_seconds", "wall_seconds"} {
			v, ok := ph[k].(float64)
			if !ok || v < 0 {
				t.Fatalf("%v: phase %s is %v (%T), want a number ≥ 0; phases %v", c.args, k, ph[k], ph[k], ph)
			}
			if k != "wall_seconds" {
				sum += v
			}
		}
		wall := ph["wall_seconds"].(float64)
		if sum > wall+1e-6 || sum < wall-1e-6 || wall > outside || wall <= 0 {
			t.Errorf("%v: phases sum to %.6f s, wall %.6f s, %.6f s measured around the process: want sum = wall ≤ measured", c.args, sum, wall, outside)
		}
		if ph["startup_seconds"].(float64) == 0 || ph["compute_seconds"].(float64) == 0 {
			t.Errorf("%v: start-up or compute took no time: %v", c.args, ph)
		}
		if fused, _ := ph["check_fused"].(bool); fused != c.fused {
			t.Errorf("%v: check_fused %v, want %v", c.args, ph["check_fused"], c.fused)
		}
		if c.fused && ph["check_seconds"].(float64) != 0 {
			t.Errorf("%v: the check is fused but took %v s of its own", c.args, ph["check_seconds"])
		}
		line := ""
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, "affinity: phases: start-up ") {
				line = l
			}
		}
		if line == "" || !strings.Contains(line, fmt.Sprintf("; wall %.3f s", wall)) {
			t.Errorf("%v: no phases line ending with the report's wall time on stderr:\n%s", c.args, stderr)
		}
	}
}

func filterEnv(env []string, drop ...string) []string {
	var out []string
	for _, e := range env {
		keep := true
		for _, d := range drop {
			if strings.HasPrefix(e, d+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, e)
		}
	}
	return out
}

// TestDotAffinityShowsThePipeline: `tapeloop dot affinity` prints the
// graph of the mode the flags select, from the block's row indices on:
// the whole matrix assembled by Mirror (or, where float32 dot products
// run on the packed matrix product, written by the fused op), top-k
// selected by TopK, or streamed rows summed by BatchStats.
func TestDotAffinityShowsThePipeline(t *testing.T) {
	small := []string{"dot", "affinity", "-n", "101", "--height", "5", "--width", "5"}
	symmetric := []string{"index", "Pairwise{dot, N=101, D=25, upper}", "Mirror{"}
	if cpukern.GEMM() {
		symmetric = []string{"index", "fused pairwise+mirror: Pairwise{dot, N=101, D=25, upper}, writes the (101, 101) matrix"}
	}
	for _, c := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"symmetric", nil, symmetric},
		{"top-k", []string{"--topk", "3"}, []string{"index", "Pairwise{dot, N=101, D=25}", "TopK{K=3, N=101}"}},
		{"streamed", []string{"--mem-limit", "20KiB"}, []string{"index", "Pairwise{dot, N=101, D=25}", "BatchStats{"}},
	} {
		out, se, code := run(t, append(small, c.extra...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, se)
		}
		if n := strings.Count(out, "label="); n != len(c.want) {
			t.Errorf("%s: %d nodes, want %d:\n%s", c.name, n, len(c.want), out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, out)
			}
		}
	}
}

// TestAffinityUint8Exact: 8-bit images (N odd, D not a multiple of 64)
// are computed on exactly, in integers: every built-in metric equals
// NumPy's int64 result converted to the output's type, bit for bit, in
// float32 and float64, whole matrix and streamed rows, and shards of the
// exact path merge into one run's matrix.
func TestAffinityUint8Exact(t *testing.T) {
	py := testutil.Python(t, "numpy")
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	script := `
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(8008)
x = rng.integers(0, 256, size=(151, 9, 11), dtype=np.uint8)
x[3] = 255
np.save(d + "/u8.npy", x)
a = x.reshape(len(x), -1).astype(np.int64)
dot = a @ a.T
sq = (a * a).sum(1)
l1 = np.abs(a[:, None, :] - a[None, :, :]).sum(-1)
np.save(d + "/dot.npy", dot.astype(np.float64))
np.save(d + "/l2.npy", (-(sq[:, None] + sq[None, :] - 2 * dot)).astype(np.float64))
np.save(d + "/l1.npy", (-l1).astype(np.float64))
np.save(d + "/cosine.npy", dot / (np.sqrt(sq.astype(np.float64))[:, None] * np.sqrt(sq.astype(np.float64))[None, :]))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	for _, m := range []string{"dot", "l2", "l1", "cosine"} {
		_, want, _ := npy.ReadAll64(p(m + ".npy"))
		for _, dtype := range []string{"float32", "float64"} {
			for _, mode := range [][]string{{"--block", "40"}, {"--mem-limit", "250KiB", "--block", "13"}} {
				out := p(fmt.Sprintf("%s_%s_%d.npy", m, dtype, len(mode)))
				args := append([]string{"affinity", "-q", "--images", p("u8.npy"), "--metric", m, "--dtype", dtype, "--out", out}, mode...)
				if _, se, code := run(t, args...); code != 0 {
					t.Fatalf("%s %s %v: exit %d: %s", m, dtype, mode, code, se)
				}
				_, got, _ := npy.ReadAll64(out)
				for i := range want {
					w := want[i]
					if dtype == "float32" {
						w = float64(float32(w))
					}
					if got[i] != w {
						t.Fatalf("%s %s %v: entry %d is %v, want %v exactly", m, dtype, mode, i, got[i], w)
					}
				}
			}
		}
	}
	for i := range 2 {
		if _, se, code := run(t, "affinity", "-q", "--images", p("u8.npy"), "--metric", "l2", "--shard", fmt.Sprintf("%d/2", i),
			"--out", p(fmt.Sprintf("s%d.npz", i))); code != 0 {
			t.Fatalf("shard %d: exit %d: %s", i, code, se)
		}
	}
	if _, se, code := run(t, "merge", "--out", p("merged.npy"), p("s0.npz"), p("s1.npz")); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, se)
	}
	a, _ := os.ReadFile(p("merged.npy"))
	b, _ := os.ReadFile(p("l2_float32_2.npy"))
	if string(a) != string(b) {
		t.Error("merged shards differ from one run")
	}
}

// TestAffinityFormulaThatIsABuiltin: the author's own spelling of a
// built-in metric runs the built-in kernel: the (N, N) matrix and the
// top-k archive byte for byte those of --metric, in float32 and float64.
func TestAffinityFormulaThatIsABuiltin(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	for _, c := range []struct{ metric, formula string }{
		{"l1", "-sum(abs(a - b))"},
		{"l2", "-sum((a-b)^2)"},
		{"dot", "sum(a*b)"},
		{"cosine", "sum(a*b)/sqrt(sum(a^2)*sum(b^2))"},
	} {
		for _, dt := range []string{"float32", "float64"} {
			for _, out := range []string{".npy", ".npz"} {
				base := []string{"affinity", "--quiet", "-n", "157", "--height", "7", "--width", "9", "--dtype", dt}
				if out == ".npz" {
					base = append(base, "--topk", "5")
				}
				a, b := p(c.metric+dt+"-metric"+out), p(c.metric+dt+"-formula"+out)
				base = slices.Clip(base) // each append below makes its own array
				for _, args := range [][]string{append(base, "--metric", c.metric, "--out", a), append(base, "--formula", c.formula, "--out", b)} {
					if _, se, code := run(t, args...); code != 0 {
						t.Fatalf("%v: exit %d: %s", args, code, se)
					}
				}
				x, _ := os.ReadFile(a)
				y, _ := os.ReadFile(b)
				if len(x) == 0 || !bytes.Equal(x, y) {
					t.Errorf("%s %s%s: --formula %q differs from --metric %s", c.metric, dt, out, c.formula, c.metric)
				}
			}
		}
	}
}

// writeU8 writes x as an (n, d) uint8 .npy file.
func writeU8(t *testing.T, path string, x []uint8, n, d int) {
	t.Helper()
	hdr := npy.EncodeHeader(npy.Dtype{Kind: 'u', Size: 1, Order: byteorder.LittleEndian}, []int{n, d})
	if err := os.WriteFile(path, append(hdr, x...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// exactU8 is the (n, n) matrix of metric m ("dot", "l1" or "l2") of the
// 8-bit images x, by the definition, in int64 arithmetic.
func exactU8(x []uint8, n, d int, m string) []int64 {
	a := make([]int64, n*n)
	for i := range n {
		for j := range n {
			var s int64
			for k := range d {
				p, q := int64(x[i*d+k]), int64(x[j*d+k])
				switch m {
				case "dot":
					s += p * q
				case "l1":
					s -= max(p-q, q-p)
				case "l2":
					s -= (p - q) * (p - q)
				}
			}
			a[i*n+j] = s
		}
	}
	return a
}

// readInts reads an int32 or int64 .npy file written by tapeloop, checking
// its dtype and shape.
func readInts(t *testing.T, path, dtype string, shape []int) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]npy.Dtype{"int32": npy.Int32, "int64": npy.Int64}[dtype]
	hdr := npy.EncodeHeader(want, shape)
	if !bytes.HasPrefix(b, hdr) {
		t.Fatalf("%s: header %q, want %q", path, b[:min(len(b), len(hdr))], hdr)
	}
	b = b[len(hdr):]
	if len(b)%want.Size != 0 || len(b)/want.Size != shape[0]*shape[1] {
		t.Fatalf("%s: %d data bytes for shape %v %s", path, len(b), shape, dtype)
	}
	out := make([]int64, len(b)/want.Size)
	for i := range out {
		if want.Size == 4 {
			out[i] = int64(int32(byteorder.LittleEndian.Uint32(b[4*i:])))
		} else {
			out[i] = int64(byteorder.LittleEndian.Uint64(b[8*i:]))
		}
	}
	return out
}

// TestAffinityIntegerExact: --dtype int32 and int64 of fresh random 8-bit
// images (N and D odd, one image of 255s: the largest values) equal an
// int64 reference loop at every element, for dot, l1 and l2, whole in
// memory, streamed, in shards cut inside blocks and merged (byte for byte
// the one run's file), and their top k (values as integers of the dtype,
// indices as the reference orders them).
func TestAffinityIntegerExact(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 77))
	n, d := 301+2*rng.IntN(20), 31+2*rng.IntN(20) // the int32 matrix over the limit below
	x := make([]uint8, n*d)
	for i := range x {
		x[i] = uint8(rng.IntN(256))
	}
	for i := range x[5*d : 6*d] {
		x[5*d+i] = 255
	}
	writeU8(t, p("u8.npy"), x, n, d)
	t.Logf("N = %d, D = %d", n, d)
	for _, m := range []string{"dot", "l1", "l2"} {
		want := exactU8(x, n, d, m)
		var total int64
		for _, v := range want {
			total += v
		}
		for _, dt := range []string{"int32", "int64"} {
			base := []string{"affinity", "--images", p("u8.npy"), "--metric", m, "--dtype", dt}
			whole := p(m + dt + ".npy")
			for _, mode := range [][]string{{"--block", "40"}, {"--mem-limit", "260KiB", "--block", "13"}} {
				out := p(m + dt + "-mode.npy")
				if len(mode) == 2 {
					out = whole
				}
				so, se, code := run(t, append(append(slices.Clip(base), "--quiet", "--out", out, "--report", out+".json"), mode...)...)
				if code != 0 {
					t.Fatalf("%s %s %v: exit %d: %s", m, dt, mode, code, se)
				}
				var rep struct{ Result struct{ Symmetric bool } }
				b, _ := os.ReadFile(out + ".json")
				json.Unmarshal(b, &rep)
				if rep.Result.Symmetric != (len(mode) == 2) {
					t.Fatalf("%s %s %v: symmetric %v", m, dt, mode, rep.Result.Symmetric)
				}
				if w := fmt.Sprintf("%s: sum of all affinities %d\n", dt, total); !strings.HasSuffix(so, w) {
					t.Errorf("%s %s %v: %q, want it to end %q", m, dt, mode, so, w)
				}
				got := readInts(t, out, dt, []int{n, n})
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s %s %v: element (%d, %d) is %d, want %d", m, dt, mode, i/n, i%n, got[i], want[i])
					}
				}
			}
			// Three shards of blocks of 7 rows: the cuts fall inside blocks.
			var shards []string
			for i := range 3 {
				s := p(fmt.Sprintf("%s%s-%d.npz", m, dt, i))
				if _, se, code := run(t, append(slices.Clip(base), "--quiet", "--block", "7", "--shard", fmt.Sprintf("%d/3", i), "--out", s)...); code != 0 {
					t.Fatalf("%s %s shard %d: exit %d: %s", m, dt, i, code, se)
				}
				shards = append(shards, s)
			}
			merged := p(m + dt + "-merged.npy")
			if _, se, code := run(t, append([]string{"merge", "--out", merged}, shards...)...); code != 0 {
				t.Fatalf("%s %s merge: exit %d: %s", m, dt, code, se)
			}
			a, _ := os.ReadFile(merged)
			b, _ := os.ReadFile(whole)
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Errorf("%s %s: merged shards differ from one run", m, dt)
			}
			// Top k: the k largest of each row, self excluded, ties to the
			// smaller column.
			const k = 5
			top := p(m + dt + "-top.npz")
			if _, se, code := run(t, append(slices.Clip(base), "--quiet", "--block", "11", "--topk", "5", "--out", top)...); code != 0 {
				t.Fatalf("%s %s top-k: exit %d: %s", m, dt, code, se)
			}
			z, err := npy.OpenNPZ(top)
			if err != nil {
				t.Fatal(err)
			}
			r, c, err := z.Open("values")
			if err != nil {
				t.Fatal(err)
			}
			if r.Dtype.Name() != dt {
				t.Errorf("%s %s: top-k values are %s", m, dt, r.Dtype.Name())
			}
			vals := make([]float64, n*k)
			if _, err := r.Read64(vals); err != nil {
				t.Fatal(err)
			}
			c.Close()
			z.Close()
			for i := range n {
				row := slices.Clone(want[i*n : (i+1)*n])
				row = slices.Delete(row, i, i+1)
				slices.SortFunc(row, func(a, b int64) int { return int(b - a) })
				for j := range k {
					if vals[i*k+j] != float64(row[j]) {
						t.Fatalf("%s %s: top-k value (%d, %d) is %v, want %d", m, dt, i, j, vals[i*k+j], row[j])
					}
				}
			}
		}
	}
}

// TestAffinityInt32Overflow: int32 is refused, with one line naming
// int64, exactly where a value could exceed it (D·255² for dot and l2,
// D·255 for l1), before anything is written; at the bound it runs.
func TestAffinityInt32Overflow(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		metric string
		d      int // the largest D that fits
	}{{"dot", 33025}, {"l2", 33025}, {"l1", 8421504}} {
		for _, d := range []int{c.d, c.d + 1} {
			x := make([]uint8, 2*d)
			for i := range x[:d] {
				x[i] = 255 // the extreme image; the other is zeros
			}
			in, out := p(fmt.Sprintf("%s%d.npy", c.metric, d)), p(fmt.Sprintf("%s%d-A.npy", c.metric, d))
			writeU8(t, in, x, 2, d)
			_, se, code := run(t, "affinity", "--quiet", "--images", in, "--metric", c.metric, "--dtype", "int32", "--out", out)
			_, statErr := os.Stat(out)
			if d == c.d {
				if code != 0 {
					t.Fatalf("%s D = %d: exit %d: %s", c.metric, d, code, se)
				}
				got := readInts(t, out, "int32", []int{2, 2})
				want := exactU8(x, 2, d, c.metric)
				if !slices.Equal(got, want) {
					t.Errorf("%s D = %d: %v, want %v", c.metric, d, got, want)
				}
				continue
			}
			if code != 1 || strings.Count(se, "\n") != 1 || !strings.Contains(se, "--dtype int32") || !strings.Contains(se, "use --dtype int64") || statErr == nil {
				t.Errorf("%s D = %d: exit %d, output file %v, stderr %q; want one line refusing int32 for int64 and no file", c.metric, d, code, statErr == nil, se)
			}
		}
	}
	// Integer affinities that cannot be exact are refused too.
	f := p("f.npy")
	writeNpy(t, f, []int{3, 2}, []float64{1, 2, 3, 4, 5, 6})
	u := p("u.npy")
	writeU8(t, u, []uint8{1, 2, 3, 4, 5, 6}, 3, 2)
	for _, args := range [][]string{
		{"--images", f, "--dtype", "int64"},
		{"-n", "5", "--height", "2", "--width", "2", "--dtype", "int64"},
		{"--images", u, "--metric", "cosine", "--dtype", "int64"},
		{"--images", u, "--formula", "sum(a*b)", "--dtype", "int32"},
		{"--images", u, "--dtype", "int16"},
	} {
		out := p("refused.npy")
		_, se, code := run(t, append([]string{"affinity", "--quiet", "--out", out}, args...)...)
		if _, err := os.Stat(out); code != 1 || strings.Count(se, "\n") != 1 || !strings.Contains(se, "--dtype") || err == nil {
			t.Errorf("%v: exit %d, stderr %q, output %v; want one line about --dtype and no file", args, code, se, err == nil)
		}
	}
}

// TestAffinityNonFiniteCountIsTheMatrixs: the warning's count of the
// non-finite values a formula gave is the number of NaN entries in the
// matrix written, whatever the block of rows, for the formula rewritten
// over dot products and computed directly, held in memory and streamed
// as rows; and --report holds the same count, with the NaN sum as null.
func TestAffinityNonFiniteCountIsTheMatrixs(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	const n, d = 61, 5
	rng := rand.New(rand.NewPCG(81, 82))
	x := make([]float64, n*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	want := 0 // the log of a negative dot product: NaN
	for i := range n {
		for j := range n {
			var dot float64
			for k := range d {
				dot += x[i*d+k] * x[j*d+k]
			}
			if dot < 0 {
				want++
			}
		}
	}
	writeNpy(t, p("x.npy"), []int{n, d}, x)
	for _, method := range []string{"auto", "direct"} {
		for _, mode := range [][]string{{"--block", "1"}, {"--block", "6"}, {"--block", "13"}, {"--block", "60"},
			{"--block", "61"}, {}, {"--block", "7", "--mem-limit", "300KiB"}} {
			args := append([]string{"affinity", "--quiet", "--images", p("x.npy"), "--formula", "log(sum(a*b))",
				"--dtype", "float64", "--method", method, "--out", p("o.npy"), "--report", p("r.json")}, mode...)
			_, stderr, code := run(t, args...)
			wantMsg := fmt.Sprintf("tapeloop: warning: --formula gave %d non-finite values (NaN or ±Inf)\n", want)
			if code != 0 || stderr != wantMsg {
				t.Fatalf("%v: exit %d, stderr %q; want 0, %q", args[4:], code, stderr, wantMsg)
			}
			_, got, err := npy.ReadAll64(p("o.npy"))
			if err != nil {
				t.Fatal(err)
			}
			nans := 0
			for _, v := range got {
				if math.IsNaN(v) {
					nans++
				}
			}
			if nans != want {
				t.Fatalf("%v: %d NaN in the matrix, want %d", args[4:], nans, want)
			}
			var rep struct {
				Result struct {
					Checksum  *float64 `json:"checksum"`
					NonFinite int      `json:"nonfinite"`
				} `json:"result"`
				NonFiniteAt []string `json:"non_finite"`
			}
			b, err := os.ReadFile(p("r.json"))
			if err == nil {
				err = json.Unmarshal(b, &rep)
			}
			if err != nil || rep.Result.Checksum != nil || rep.Result.NonFinite != want ||
				!slices.Equal(rep.NonFiniteAt, []string{"result.checksum"}) {
				t.Fatalf("%v: report %+v, %v", args[4:], rep, err)
			}
		}
	}
}
