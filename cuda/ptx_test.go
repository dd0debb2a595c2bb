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
		"kernels/pairwise.ptx": {"pairwise_l1", "pairwise_l1_r4", "pairwise_l2", "pairwise_dot", "pairwise_cosine", "cosine_scale"},
		"kernels/wavelet.ptx":  {"hat_scatter", "cmul", "crop_stats", "reflect_extend"}} {
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
