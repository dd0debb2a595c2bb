package cuda

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// NVCCFlags are the flags `make generate` compiles kernels/*.cu with.
var nvccFlags = []string{"-ptx", "-arch=compute_80", "-O3"}

var releaseRE = regexp.MustCompile(`Cuda compilation tools, release [0-9.]+, V[0-9.]+`)

// TestPTXCurrent recompiles every kernel and fails when the committed PTX
// differs: a .cu edited without `make generate`. It skips where nvcc is
// missing, and where nvcc is another release than the one that wrote the
// committed PTX (its output differs in more than the header).
func TestPTXCurrent(t *testing.T) {
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		t.Skip("nvcc not installed: the PTX check needs the CUDA toolkit")
	}
	sources, err := filepath.Glob("kernels/*.cu")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no kernel sources: %v", err)
	}
	ver, err := exec.Command(nvcc, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	release := releaseRE.FindString(string(ver))
	for _, src := range sources {
		if _, err := os.ReadFile(src); err != nil { // for go test's cache: nvcc reads it in a child
			t.Fatal(err)
		}
		committed, err := os.ReadFile(strings.TrimSuffix(src, ".cu") + ".ptx")
		if err != nil {
			t.Errorf("%s has no committed PTX: run make generate", src)
			continue
		}
		if got := releaseRE.Find(committed); string(got) != release {
			t.Skipf("%s was written by %q, this nvcc is %q: not comparable", src, got, release)
		}
		out := filepath.Join(t.TempDir(), "k.ptx")
		cmd := exec.Command(nvcc, append(append([]string{}, nvccFlags...), "-o", out, src)...)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nvcc %s: %v\n%s", src, err, msg)
		}
		fresh, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s: committed PTX is stale; run make generate and commit it", src)
		}
	}
}

// TestEntriesNameEveryKernel checks the PTX parser Open relies on.
func TestEntriesNameEveryKernel(t *testing.T) {
	for src, want := range map[string][]string{"kernels/interp.ptx": {"interp1d_f32"}, "kernels/drr.ptx": {"drr"},
		"kernels/pairwise.ptx": {"pairwise_l1", "pairwise_l1_r4", "pairwise_l2", "pairwise_dot", "pairwise_cosine", "cosine_scale", "transpose", "topk_rows", "topk_rows128"},
		"kernels/wavelet.ptx":  {"hat_scatter", "cmul", "crop_stats", "reflect_extend", "finish_stats"}} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got := entries(string(b))
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: entries %v, want %v", src, got, want)
		}
	}
}

var spillRE = regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)

// TestPTXAssembles assembles the committed PTX with ptxas for the A100
// (sm_80) and the H100/H200 (sm_90), as the driver's JIT does when a
// module is loaded, and fails on an error or on a kernel that spills
// registers to local memory. It skips where ptxas is missing.
func TestPTXAssembles(t *testing.T) {
	ptxas, err := exec.LookPath("ptxas")
	if err != nil {
		t.Skip("ptxas not installed: the check needs the CUDA toolkit")
	}
	files, err := filepath.Glob("kernels/*.ptx")
	if err != nil || len(files) == 0 {
		t.Fatalf("no PTX: %v", err)
	}
	for _, arch := range []string{"sm_80", "sm_90"} {
		for _, f := range files {
			out, err := exec.Command(ptxas, "-arch="+arch, "-O3", "-v", "-o", filepath.Join(t.TempDir(), "k.cubin"), f).CombinedOutput()
			if err != nil {
				t.Errorf("ptxas -arch=%s %s: %v\n%s", arch, f, err, out)
				continue
			}
			spills := spillRE.FindAllStringSubmatch(string(out), -1)
			if len(spills) == 0 {
				t.Errorf("ptxas -arch=%s %s: no register report in\n%s", arch, f, out)
			}
			for _, m := range spills {
				if m[1] != "0" || m[2] != "0" {
					t.Errorf("ptxas -arch=%s %s: a kernel spills registers (%s)\n%s", arch, f, m[0], out)
				}
			}
		}
	}
}
