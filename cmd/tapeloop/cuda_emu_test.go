//go:build tapeloop_cudaemu

package main

// The GPU flavour's whole path (flags, planner, Programs, the CUDA twins,
// --devices, telemetry) run as users run it, on the CUDA emulator (build
// tag tapeloop_cudaemu: the kernels on the CPU, cuBLAS and cuFFT as
// reference loops), against the CPU run of the same command.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
)

func TestEmulatedGPUMatchesCPU(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	cases := []struct {
		name string
		args []string // %s: the output
		out  string   // output file (in the output directory for drr)
		tol  float64
		// onCPU: the emulator computes it on the CPU (a kernel compiled
		// at run time), with no device memory or time to report.
		onCPU bool
	}{
		{"interp sumsq", []string{"interp", "--points", "3000", "--grid", "64", "--interpolants", "20", "--batch", "700"}, "", 1e-5, false},
		{"interp none", []string{"interp", "--points", "900", "--grid", "40", "--interpolants", "7", "--reduce", "none", "--batch", "200"}, "", 1e-5, false},
		{"drr siddon", []string{"drr", "--size", "24", "--orbit", "5", "--detector", "16x20", "--pixel", "12", "--batch", "2"}, "drr.npy", 1e-5, false},
		{"drr trilinear", []string{"drr", "--size", "24", "--orbit", "5", "--detector", "16x20", "--pixel", "12", "--batch", "2",
			"--method", "trilinear", "--step", "2"}, "drr.npy", 1e-5, false},
		{"affinity l1", []string{"affinity", "--n", "90", "--height", "6", "--width", "7", "--metric", "l1", "--block", "20"}, "", 1e-5, false},
		{"affinity l2", []string{"affinity", "--n", "90", "--height", "6", "--width", "7", "--metric", "l2", "--block", "20"}, "", 1e-5, false},
		{"affinity dot", []string{"affinity", "--n", "90", "--height", "6", "--width", "7", "--metric", "dot", "--block", "20"}, "", 1e-5, false},
		{"affinity cosine", []string{"affinity", "--n", "90", "--height", "6", "--width", "7", "--metric", "cosine", "--block", "20"}, "", 1e-5, false},
		{"affinity dot tf32", []string{"affinity", "--n", "90", "--height", "6", "--width", "7", "--metric", "dot", "--block", "20", "--tf32"}, "", 3e-4, false},
		{"affinity formula", []string{"affinity", "--n", "90", "--height", "6", "--width", "7", "--formula", "-sum(abs(a-b))", "--block", "20"}, "", 1e-5, true},
		{"affinity formula products", []string{"affinity", "--n", "90", "--height", "6", "--width", "7", "--formula", "exp(-sum((a-b)^2)/(2*s^2))",
			"--param", "s=3", "--block", "20"}, "", 1e-5, false},
		{"drr post", []string{"drr", "--size", "24", "--orbit", "5", "--detector", "16x20", "--pixel", "12", "--batch", "2",
			"--post", "1-exp(-p)"}, "drr.npy", 1e-5, false},
		{"drr mu and post over the image", []string{"drr", "--size", "24", "--orbit", "5", "--detector", "16x20", "--pixel", "12", "--batch", "2",
			"--mu", "where(h < 0.01, 0, h)", "--post", "p/max(p)"}, "drr.npy", 1e-5, false},
		{"drr post and filters", []string{"drr", "--size", "24", "--orbit", "5", "--detector", "16x20", "--pixel", "12", "--batch", "2",
			"--post", "1-exp(-p)", "--filter", "gauss:sigma_mm=20", "--filter", "sobel:y,mode=nearest"}, "drr.npy", 1e-5, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tag := strings.ReplaceAll(c.name, " ", "-")
			outputs := map[string][]float64{}
			for _, dev := range [][]string{{"--device", "cpu"}, {"--device", "cuda"}, {"--device", "cuda", "--devices", "0,1"}} {
				name := tag + strings.Join(dev, "")
				out := p(name + ".npy")
				file := out
				if c.out != "" { // a directory of outputs
					file = filepath.Join(out, c.out)
				}
				args := append(append([]string{}, c.args...), "--quiet", "--out", out, "--report", p(name+".json"))
				if c.args[0] == "affinity" && len(dev) > 0 && dev[1] == "cpu" {
					args = removeFlag(args, "--tf32") // the CPU has no TF32: compare with float32
				}
				if _, se, code := run(t, append(args, dev...)...); code != 0 {
					t.Fatalf("%v: exit %d: %s", dev, code, se)
				}
				_, v, err := npy.ReadAll64(file)
				if err != nil {
					t.Fatal(err)
				}
				outputs[strings.Join(dev, " ")] = v
				if dev[1] == "cuda" && !c.onCPU {
					checkDeviceBytes(t, p(name+".json"))
				}
			}
			want := outputs["--device cpu"]
			for k, got := range outputs {
				if len(got) != len(want) {
					t.Fatalf("%s: %d values, want %d", k, len(got), len(want))
				}
				if e := normRel(got, want); !(e <= c.tol) {
					t.Errorf("%s: relative error %.3g against the CPU", k, e)
				}
			}
		})
	}
}

func TestEmulatedGPUWavelet(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, bnd := range []string{"wrap", "reflect"} {
		res := map[string][][]float64{}
		for _, dev := range [][]string{{"--device", "cpu"}, {"--device", "cuda", "--devices", "0,1"}} {
			out := p(bnd + strings.Join(dev, "") + ".csv")
			if _, se, code := run(t, append([]string{"wavelet", "--quiet", "--size", "10x12x11", "--theta", "0,0.7,2.2", "--phi", "0,1.3",
				"--xi", "1,2.5", "--boundary", bnd, "--batch", "3", "--out", out}, dev...)...); code != 0 {
				t.Fatalf("%s %v: exit %d: %s", bnd, dev, code, se)
			}
			res[dev[1]] = readCSV(t, out, true)
		}
		want, got := res["cpu"], res["cuda"]
		if len(got) != len(want) || len(want) != 12 {
			t.Fatalf("%s: %d rows on the GPU, %d on the CPU, want 12", bnd, len(got), len(want))
		}
		for i := range want {
			for j := range want[i] {
				if !(math.Abs(got[i][j]-want[i][j]) <= 1e-4*math.Abs(want[i][j])+1e-9) {
					t.Errorf("%s: row %d column %d: %v on the GPU, %v on the CPU", bnd, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
}

// TestEmulatedGPUTopK: the nearest neighbours on the GPU are the CPU's,
// over blocks that do not divide N (the last one padded) and two GPUs.
func TestEmulatedGPUTopK(t *testing.T) {
	dir := t.TempDir()
	read := func(path, member string) []float64 {
		z, err := npy.OpenNPZ(path)
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		r, c, err := z.Open(member)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		v := make([]float64, r.Len())
		if _, err := r.Read64(v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// k up to 128 is selected on the GPU (two kernels), k = 130 on the host.
	for _, c := range []struct {
		m    string
		k, n int
	}{{"cosine", 4, 97}, {"l2", 40, 97}, {"dot", 130, 200}} {
		m, k, n := c.m, c.k, c.n
		res := map[string]string{}
		for _, dev := range [][]string{{"--device", "cpu"}, {"--device", "cuda", "--devices", "0,1"}} {
			out := filepath.Join(dir, fmt.Sprint(m, k, dev[1], ".npz"))
			if _, se, code := run(t, append([]string{"affinity", "--quiet", "--n", fmt.Sprint(n), "--height", "5", "--width", "6", "--metric", m,
				"--block", "20", "--topk", fmt.Sprint(k), "--out", out}, dev...)...); code != 0 {
				t.Fatalf("%s %v: exit %d: %s", m, dev, code, se)
			}
			res[dev[1]] = out
		}
		gi, wi := read(res["cuda"], "indices"), read(res["cpu"], "indices")
		gv, wv := read(res["cuda"], "values"), read(res["cpu"], "values")
		if len(gi) != n*k || len(wi) != len(gi) {
			t.Fatalf("%s: %d and %d indices, want %d", m, len(gi), len(wi), n*k)
		}
		for i := range wi {
			if gi[i] != wi[i] {
				t.Errorf("%s k=%d: neighbour %d of image %d: %v on the GPU, %v on the CPU", m, k, i%k, i/k, gi[i], wi[i])
			}
		}
		if e := normRel(gv, wv); !(e <= 1e-5) {
			t.Errorf("%s k=%d: values differ by %.3g", m, k, e)
		}
	}
}

// TestEmulatedGPUMemLimit: device memory is planned under --mem-limit as
// host memory is: a limit the host buffers fit but the GPU arena (with
// cuBLAS's 32 MiB workspace) does not fails at planning, and a GPU with
// less memory than the plan fails at its allocation; each with one line,
// exit status 1 and no output.
func TestEmulatedGPUMemLimit(t *testing.T) {
	out := filepath.Join(t.TempDir(), "a.npy")
	args := []string{"affinity", "--quiet", "--n", "400", "--height", "30", "--width", "30", "--metric", "dot", "--device", "cuda", "--out", out}
	for _, c := range []struct {
		name  string
		extra []string
		env   string
		want  string
	}{
		{"plan", []string{"--mem-limit", "16MiB"}, "", "of GPU memory for a batch of 1, over the memory limit of 16 MiB"},
		{"small GPU", []string{"--mem-limit", "1GiB"}, "TAPELOOP_CUDAEMU_MEM=20MiB", "out of memory"},
	} {
		cmd := exec.Command(binary, append(args, c.extra...)...)
		cmd.Env = append(os.Environ(), c.env)
		se, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 || strings.Count(strings.TrimSpace(string(se)), "\n") != 0 || !strings.Contains(string(se), c.want) {
			t.Errorf("%s: %v, output %q; want exit status 1 and one line with %q", c.name, err, se, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: output written", c.name)
		}
	}
	// The same run fits 64 MiB, and its report shows the arena.
	if _, se, code := run(t, append(args, "--mem-limit", "64MiB", "--report", out+".json")...); code != 0 {
		t.Fatalf("64 MiB: exit %d: %s", code, se)
	}
	checkDeviceBytes(t, out+".json")
}

func removeFlag(args []string, flag string) []string {
	var out []string
	for _, a := range args {
		if a != flag {
			out = append(out, a)
		}
	}
	return out
}

// checkDeviceBytes: every batch reports the device memory in use, which
// stays under the run's memory limit, and the device's busy time.
func checkDeviceBytes(t *testing.T, report string) {
	t.Helper()
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		MemLimit   int64 `json:"mem_limit_bytes"`
		Iterations []struct {
			DeviceBytes   int64   `json:"device_bytes"`
			DeviceSeconds float64 `json:"device_seconds"`
			Seconds       float64 `json:"seconds"`
		} `json:"iterations"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Iterations) == 0 {
		t.Fatalf("%s: no iterations", report)
	}
	for i, it := range r.Iterations {
		if it.DeviceBytes <= 0 || it.DeviceBytes > r.MemLimit {
			t.Errorf("%s: batch %d: device_bytes %d, limit %d", report, i, it.DeviceBytes, r.MemLimit)
			return
		}
		if !(it.DeviceSeconds > 0) {
			t.Errorf("%s: batch %d: device_seconds %v, want the batch's kernel time", report, i, it.DeviceSeconds)
			return
		}
	}
}

// TestEmulatedGPUDotAffinity: on a GPU the graph shows the fused passes
// where the CPU has two ops: one node that computes the blocks and writes
// the whole matrix, one that computes them and selects the top k (no TopK
// node); above k = 128 the GPU computes the blocks and TopK selects on the
// host.
func TestEmulatedGPUDotAffinity(t *testing.T) {
	small := []string{"dot", "affinity", "-n", "200", "--height", "5", "--width", "5", "--device", "cuda"}
	for _, c := range []struct {
		name   string
		extra  []string
		nodes  int
		want   []string
		absent string
	}{
		{"symmetric", nil, 2, []string{"index", "GPU fused pairwise+mirror", "writes the (200, 200) matrix"}, "Mirror{"},
		{"top-k", []string{"--topk", "3"}, 2, []string{"index", "GPU fused pairwise+top-k", "(2, 200, 3) float64"}, "TopK{"},
		{"top-k on the host", []string{"--topk", "130"}, 3, []string{"index", "Pairwise{dot, N=200, D=25}@", "TopK{K=130, N=200}"}, "fused"},
		{"streamed", []string{"--mem-limit", "40MiB", "--shard", "0/2"}, 3, []string{"index", "Pairwise{dot, N=200, D=25}@", "BatchStats{"}, "fused"},
	} {
		out, se, code := run(t, append(small, c.extra...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, se)
		}
		if n := strings.Count(out, "label="); n != c.nodes {
			t.Errorf("%s: %d nodes, want %d:\n%s", c.name, n, c.nodes, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, out)
			}
		}
		if strings.Contains(out, c.absent) {
			t.Errorf("%s: %q in\n%s", c.name, c.absent, out)
		}
	}
}

// The formulas with no GPU path are refused on the GPU, saying what to do.
func TestEmulatedGPUFormulaRefusals(t *testing.T) {
	for _, args := range [][]string{
		{"interp", "--points", "100", "--grid", "16", "--interpolants", "5", "--reduce", "max(v)"},
		{"wavelet", "--size", "8x8x8", "--stat", "l1=sum(abs(g))"},
	} {
		_, se, code := run(t, append(args, "--device", "cuda", "--quiet")...)
		if code == 0 || !strings.Contains(se, "CPU only; use --device cpu") {
			t.Errorf("%v: exit %d, %q; want a refusal naming --device cpu", args, code, se)
		}
	}
}
