package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

var binary string

// TestMain builds the tapeloop binary once; the tests run it as users do.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tapeloop-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "tapeloop")
	if out, err := exec.Command("go", "build", "-tags", buildTags, "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// hangAfter is how long a run that should end at once (a refusal, a
// small input) may go on before a test calls it hung and kills it. It is
// far beyond what a loaded machine takes: it catches a hang (a read that
// blocks, work that grows with the square of the input), not slowness,
// which the benchmarks measure.
const hangAfter = 5 * time.Minute

// run runs tapeloop and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runCmd(t, exec.Command(binary, args...))
}

// runOrHang is run, but a run still going after hangAfter is killed and
// the test fails saying it hung.
func runOrHang(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangAfter)
	defer cancel()
	so, se, code := runCmd(t, exec.CommandContext(ctx, binary, args...))
	if ctx.Err() != nil {
		t.Fatalf("tapeloop %.200s: hung: still running after %v (killed); stderr %q", strings.Join(args, " "), hangAfter, tail(se))
	}
	return so, se, code
}

// runCmd runs cmd and returns its stdout, stderr and exit code.
func runCmd(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

func writeNpy(t *testing.T, path string, shape []int, data []float64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := npy.NewWriter(f, npy.Float64, shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write64(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestInterpBadInput(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	writeNpy(t, p("f.npy"), []int{3, 8}, make([]float64, 24))
	writeNpy(t, p("x.npy"), []int{5}, []float64{0, 0.1, 0.2, 0.3, 0.4})
	writeNpy(t, p("f1d.npy"), []int{24}, make([]float64, 24))
	writeNpy(t, p("f_g3.npy"), []int{3, 3}, make([]float64, 9))
	writeNpy(t, p("f_m0.npy"), []int{0, 8}, nil)
	writeNpy(t, p("f_nan.npy"), []int{1, 4}, []float64{0, math.NaN(), 1, 2})
	writeNpy(t, p("x_inf.npy"), []int{3}, []float64{0, 0.5, math.Inf(1)})
	writeNpy(t, p("x_nan.npy"), []int{70000}, append(make([]float64, 69999), math.NaN()))
	writeNpy(t, p("x2d.npy"), []int{2, 2}, make([]float64, 4))
	os.WriteFile(p("junk.npy"), []byte("not an npy file at all"), 0o644)
	os.WriteFile(p("unreadable.npy"), []byte("x"), 0o000)
	trunc, _ := os.ReadFile(p("x.npy"))
	os.WriteFile(p("trunc.npy"), trunc[:len(trunc)-9], 0o644)

	cases := []struct {
		name string
		args []string
		want string // a word the error must contain
	}{
		{"missing f", []string{"--f", p("nope.npy")}, "nope.npy"},
		{"junk f", []string{"--f", p("junk.npy")}, "not a .npy file"},
		{"unreadable f", []string{"--f", p("unreadable.npy")}, "unreadable.npy"},
		{"f rank", []string{"--f", p("f1d.npy")}, "want (M, G)"},
		{"G<4", []string{"--f", p("f_g3.npy")}, "G = 3"},
		{"M=0", []string{"--f", p("f_m0.npy")}, "M = 0"},
		{"f NaN", []string{"--f", p("f_nan.npy")}, "f[0, 1] is NaN"},
		{"dx=0", []string{"--dx", "0", "--grid", "16", "--points", "10"}, "dx"},
		{"dx<0", []string{"--dx", "-1", "--grid", "16", "--points", "10"}, "dx"},
		{"x Inf", []string{"--f", p("f.npy"), "--x", p("x_inf.npy")}, "x[2] is +Inf"},
		{"x NaN late", []string{"--f", p("f.npy"), "--x", p("x_nan.npy")}, "x[69999] is NaN"},
		{"x rank", []string{"--f", p("f.npy"), "--x", p("x2d.npy")}, "want a vector"},
		{"x truncated", []string{"--f", p("f.npy"), "--x", p("trunc.npy")}, "truncated"},
		{"reduce", []string{"--reduce", "max", "--points", "10"}, `"max"`},
		{"dtype", []string{"--dtype", "float16", "--points", "10"}, "float16"},
		{"mem-limit syntax", []string{"--mem-limit", "lots", "--points", "10"}, "mem-limit"},
		{"mem-limit too small", []string{"--mem-limit", "1KiB", "--points", "10"}, "memory limit"},
		{"batch", []string{"--batch", "0", "--points", "10"}, "--batch"},
		{"points", []string{"--points", "0"}, "--points"},
		{"grid", []string{"--grid", "2"}, "--grid"},
		{"unknown flag", []string{"--frobnicate"}, "frobnicate"},
		{"devices without cuda", []string{"--devices", "0,1", "--points", "10"}, "needs --device cuda"},
	}
	if engine.GPUBuild { // tests run the emulator build: two emulated GPUs
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"no such GPU", []string{"--device", "cuda", "--devices", "0,7", "--points", "10"}, "device 7 does not exist"})
	} else {
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"device", []string{"--device", "cuda", "--points", "10"}, "make build-cuda"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := p("out-" + strings.ReplaceAll(c.name, " ", "_") + ".npy")
			args := append([]string{"interp", "--quiet", "--out", out}, c.args...)
			stdout, stderr, code := run(t, args...)
			if code != 1 {
				t.Errorf("exit status %d, want 1; stderr %q", code, stderr)
			}
			if lines := strings.Count(strings.TrimRight(stderr, "\n"), "\n"); lines != 0 || !strings.HasPrefix(stderr, "tapeloop: ") {
				t.Errorf("stderr is not one 'tapeloop: ' line: %q", stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("error %q does not mention %q", stderr, c.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q on error", stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("partial output %s left behind", out)
			}
		})
	}
	left, _ := filepath.Glob(p(".*tmp*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if _, _, code := run(t, "frobnicate"); code != 1 {
		t.Errorf("unknown command: exit %d", code)
	}
}

// TestInterpMatchesNumPy compares tapeloop's output files with an
// independent NumPy implementation of the original case's semantics, on random
// tables and queries (including queries below a and above ub, and N not a
// multiple of the batch), read from files in both byte orders.
func TestInterpMatchesNumPy(t *testing.T) {
	py := testutil.Python(t, "numpy")
	dir := t.TempDir()
	script := `
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(20261202)
M, G, N = 37, 53, 10007
a, dx = -1.25, 0.0731
f = rng.standard_normal((M, G)) + 0.3
ub = a + (G + 1) * dx
x = rng.uniform(a - 0.5, ub + 0.5, N)
x[:4] = [a, ub, a - 3, ub + 3]
np.save(d + "/f.npy", f.astype(">f8"))            # big-endian float64
np.save(d + "/x.npy", x)
np.save(d + "/x32.npy", x.astype(np.float32))
np.save(d + "/f32.npy", f.astype(np.float32))

A = np.array([-1/16, 9/16, 9/16, -1/16]); B = np.array([1/24, -9/8, 9/8, -1/24])
C = np.array([1/4, -1/4, -1/4, 1/4]);     D = np.array([-1/6, 1/2, -1/2, 1/6])
def ref(f, x):
    fp = np.pad(f, ((0, 0), (1, 1)))
    xc = np.clip(x, a, ub) - a
    ix = np.floor(xc / dx)
    t = (xc / dx - (ix + 0.5))[:, None]
    w = A + t * (B + t * (C + t * D))
    start = np.clip(ix.astype(np.int64), 0, G - 2)
    cols = fp[:, start[:, None] + np.arange(4)]          # (M, N, 4)
    return np.einsum("mnk,nk->nm", cols, w)              # (N, M)
for tag, ff, xx in (("64", f, x), ("32", f.astype(np.float32).astype(np.float64), x.astype(np.float32).astype(np.float64))):
    v = ref(ff, xx)
    np.save(d + "/ref_none_" + tag + ".npy", v)
    np.save(d + "/ref_sum_" + tag + ".npy", v.sum(1))
    np.save(d + "/ref_sumsq_" + tag + ".npy", (v ** 2).sum(1))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, dt := range []struct{ dtype, tag, f, x string }{{"float64", "64", "f.npy", "x.npy"}, {"float32", "32", "f32.npy", "x32.npy"}} {
		for _, r := range []string{"sumsq", "sum", "none"} {
			for _, method := range []string{"auto", "direct"} {
				name := fmt.Sprintf("%s/%s/%s", dt.dtype, r, method)
				t.Run(name, func(t *testing.T) {
					out := p(fmt.Sprintf("out_%s_%s_%s.npy", dt.tag, r, method))
					_, stderr, code := run(t, "interp", "--quiet", "--f", p(dt.f), "--x", p(dt.x), "--a", "-1.25", "--dx", "0.0731",
						"--reduce", r, "--method", method, "--dtype", dt.dtype, "--batch", "1000", "--out", out)
					if code != 0 {
						t.Fatalf("exit %d: %s", code, stderr)
					}
					h, got, err := npy.ReadAll64(out)
					if err != nil {
						t.Fatal(err)
					}
					hr, want, err := npy.ReadAll64(p("ref_" + r + "_" + dt.tag + ".npy"))
					if err != nil {
						t.Fatal(err)
					}
					if npy.ShapeString(h.Shape) != npy.ShapeString(hr.Shape) || h.Dtype.Name() != dt.dtype {
						t.Fatalf("output %s %s, want %s %s", h.Dtype.Name(), npy.ShapeString(h.Shape), dt.dtype, npy.ShapeString(hr.Shape))
					}
					var num, den float64
					for i := range want {
						num += (got[i] - want[i]) * (got[i] - want[i])
						den += want[i] * want[i]
					}
					e := math.Sqrt(num / den)
					tol := 1e-12
					if dt.dtype == "float32" {
						tol = 1e-5
					}
					t.Logf("relative error %.3g", e)
					if !(e <= tol) {
						t.Errorf("‖out − ref‖/‖ref‖ = %.3g > %.0g", e, tol)
					}
				})
			}
		}
	}
}

// TestInterpSeedMemory runs the original case's case (M = 300, G = 4096, N = 10⁶,
// float32) and reads the peak RSS from the report: the original case's JAX run took
// 14 GB; tapeloop must stay under 128 MiB, and finish under a 64 MiB limit.
func TestInterpSeedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("seed-size run")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args    []string
		maxPeak int64
	}{
		{[]string{}, 128 << 20},
		{[]string{"--mem-limit", "64MiB"}, 128 << 20},
		{[]string{"--mem-limit", "64MiB", "--reduce", "none", "--points", "100000"}, 128 << 20},
	} {
		rep := filepath.Join(dir, "report.json")
		args := append([]string{"interp", "--quiet", "--report", rep}, c.args...)
		_, stderr, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		var r struct {
			Batch, Batches int
			PeakRSS        int64 `json:"peak_rss_bytes"`
			Planned        int64 `json:"planned_bytes"`
			Limit          int64 `json:"mem_limit_bytes"`
			Iterations     []json.RawMessage
		}
		b, _ := os.ReadFile(rep)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: batch %d × %d, planned %d B of %d, peak RSS %.1f MiB", c.args, r.Batch, r.Batches, r.Planned, r.Limit, float64(r.PeakRSS)/(1<<20))
		if r.PeakRSS <= 0 || r.PeakRSS > c.maxPeak {
			t.Errorf("%v: peak RSS %d bytes, want (0, %d]", c.args, r.PeakRSS, c.maxPeak)
		}
		if r.Planned > r.Limit || len(r.Iterations) != r.Batches {
			t.Errorf("%v: planned %d > limit %d, or %d iterations for %d batches", c.args, r.Planned, r.Limit, len(r.Iterations), r.Batches)
		}
	}
}

func TestDotInterpIsValidGraphviz(t *testing.T) {
	out, stderr, code := run(t, "dot", "interp", "--points", "1000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "digraph") || !strings.Contains(out, "Interp1D") {
		t.Fatalf("not a DOT graph of interp:\n%s", out)
	}
	if _, err := exec.LookPath("dot"); err != nil {
		t.Skip("graphviz dot not installed")
	}
	cmd := exec.Command("dot", "-Tsvg")
	cmd.Stdin = strings.NewReader(out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("dot rejects it: %v\n%s", err, b)
	}
}

func TestDemoPrintsTable(t *testing.T) {
	if testing.Short() {
		t.Skip("demo run")
	}
	out, stderr, code := run(t, "demo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"workload", "drift", "peak RSS", "interp sumsq", "interp none"} {
		if !strings.Contains(out, w) {
			t.Errorf("demo output lacks %q:\n%s", w, out)
		}
	}
}
