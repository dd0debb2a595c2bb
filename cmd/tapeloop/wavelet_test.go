package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/testutil"
	"github.com/urfave/cli/v2"
)

// TestWaveletMatchesSciPy compares the statistics with scipy.ndimage.convolve
// and a float64 kernel built from the definition (the SciPy peer's hat), on random non-cubic odd
// volumes with kernels larger than the volume, for both boundaries.
func TestWaveletMatchesSciPy(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.ndimage")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
from scipy import ndimage
d, mode = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from wavelet_scipy import hat  # the peer's kernel, sampled from the definition
rng = np.random.default_rng(2002)
v = rng.standard_normal((9, 13, 7)).astype(np.float32)
np.save(d + "/v.npy", v)
a = 1.0
rows = []
for th in (0.0, 0.7, 2.2):
    for ph in (0.0, 1.3):
        for xi in (1.0, 2.5):
            psi = hat(a, th, ph, xi)
            g = ndimage.convolve(v.astype(np.float64), psi, mode=mode)
            rows.append((th, ph, xi, (g**2).sum(), g.std(), g.max(), (psi**2).sum()))
np.savetxt(d + "/ref_" + mode + ".csv", np.array(rows), delimiter=",")
`
	for _, mode := range []string{"reflect", "wrap"} {
		t.Run(mode, func(t *testing.T) {
			if out, err := exec.Command(py, "-c", script, dir, mode, filepath.Join("..", "..", "bench", "peers")).CombinedOutput(); err != nil {
				t.Fatalf("scipy: %v\n%s", err, out)
			}
			out := p("stats_" + mode + ".csv")
			_, se, code := run(t, "wavelet", "--quiet", "--volume", p("v.npy"), "--theta", "0,0.7,2.2", "--phi", "0,1.3",
				"--xi", "1,2.5", "--boundary", mode, "--batch", "3", "--out", out)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, se)
			}
			got := readCSV(t, out, true)
			want := readCSV(t, p("ref_"+mode+".csv"), false)
			if len(got) != len(want) || len(got) != 12 {
				t.Fatalf("%d rows, reference %d", len(got), len(want))
			}
			for i := range want {
				for j := range 7 {
					if d := math.Abs(got[i][j] - want[i][j]); d > 1e-4*math.Abs(want[i][j])+1e-9 {
						t.Errorf("row %d column %d: %v, scipy %v", i, j, got[i][j], want[i][j])
					}
				}
			}
		})
	}
}

func readCSV(t *testing.T, path string, header bool) [][]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if header {
		if !strings.HasPrefix(strings.Join(recs[0], ",")+",", "theta,phi,xi,energy,std,max,wavelet_energy,") {
			t.Fatalf("header %v", recs[0])
		}
		recs = recs[1:]
	}
	var out [][]float64
	for _, r := range recs {
		var row []float64
		for _, s := range r {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				t.Fatal(err)
			}
			row = append(row, v)
		}
		out = append(out, row)
	}
	return out
}

// TestWaveletBadInput: what reaches the command line, as one line and no
// output file; the spec's own rules are tested in graphs
// (TestWaveletSpecValidate).
func TestWaveletBadInput(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	vol := make([]float64, 27)
	vol[4] = math.NaN()
	writeNpy(t, p("nan.npy"), []int{3, 3, 3}, vol)
	writeNpy(t, p("flat.npy"), []int{9, 3}, make([]float64, 27))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"xi zero failing on non-finite", []string{"--xi", "1,0", "--fail-on-nonfinite"}, "combinations have no kernel (the first: θ = 0, φ = 0, ξ = 0: wavelet: stretch ξ = 0 must be positive)"},
		{"NaN volume", []string{"--volume", p("nan.npy")}, "is NaN"},
		{"not 3-D", []string{"--volume", p("flat.npy")}, "3-D"},
		{"missing volume", []string{"--volume", p("none.npy")}, "--volume"},
		{"argument", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := p("out-" + strings.ReplaceAll(c.name, " ", "_") + ".csv")
			base := []string{"wavelet", "--quiet", "--out", out}
			if c.args[0] != "--volume" { // the built-in volume, small
				base = append(base, "--size", "6x6x6")
			}
			stdout, stderr, code := run(t, append(base, c.args...)...)
			if code != 1 || !strings.HasPrefix(stderr, "tapeloop: ") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stderr %q; want 1 and one line", code, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("error %q does not mention %q", stderr, c.want)
			}
			if _, err := os.Stat(out); err == nil || stdout != "" {
				t.Errorf("partial output: file exists %v, stdout %q", err == nil, stdout)
			}
		})
	}
}

// TestWaveletNoKernelRows: a sweep whose ξ list starts at 0, as
// numpy.arange(0, n) does, runs to the end. The rows of ξ ≤ 0 hold NaN,
// are counted on stderr and in the report, and every other row is the one
// the sweep without them writes, byte for byte, in both boundary modes and
// with a statistic of the user's.
func TestWaveletNoKernelRows(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	for _, b := range []string{"reflect", "wrap"} {
		base := []string{"wavelet", "--size", "13x11x9", "--seed", "4", "--theta", "0:pi:3", "--phi", "0,0.7",
			"--boundary", b, "--stat", "l1=sum(abs(g))", "-a", "1.3"}
		_, stderr, code := run(t, append(base, "--xi", "0,1,-2,2.5", "--out", p(b+"-all.csv"), "--report", p(b+".json"))...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", b, code, stderr)
		}
		if want := "warning: 12 combinations have no kernel (the first: θ = 0, φ = 0, ξ = 0: wavelet: stretch ξ = 0 must be positive); their rows hold NaN\n"; !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr %q, want the line %q", b, stderr, want)
		}
		if _, stderr, code := run(t, append(base, "--quiet", "--xi", "1,2.5", "--out", p(b+"-some.csv"))...); code != 0 {
			t.Fatalf("%s: exit %d: %s", b, code, stderr)
		}
		all, some := readLines(t, p(b+"-all.csv")), readLines(t, p(b+"-some.csv"))
		if len(all) != 1+3*2*4 || len(some) != 1+3*2*2 || all[0] != some[0] {
			t.Fatalf("%s: %d and %d lines, headers %q and %q", b, len(all), len(some), all[0], some[0])
		}
		j := 1
		for _, line := range all[1:] {
			f := strings.Split(line, ",")
			if xi, _ := strconv.ParseFloat(f[2], 64); xi > 0 {
				if line != some[j] {
					t.Errorf("%s: row %q, the sweep without ξ ≤ 0 writes %q", b, line, some[j])
				}
				j++
				continue
			}
			if strings.Join(f[3:], ",") != "NaN,NaN,NaN,NaN,NaN" {
				t.Errorf("%s: row %q of ξ ≤ 0, want NaN statistics", b, line)
			}
		}
		var rep struct {
			Result struct {
				Combinations int `json:"combinations"`
				NoKernel     int `json:"no_kernel"`
				Computed     int `json:"computed"`
			} `json:"result"`
		}
		if raw, err := os.ReadFile(p(b + ".json")); err != nil || json.Unmarshal(raw, &rep) != nil {
			t.Fatalf("%s: report: %v", b, err)
		}
		if r := rep.Result; r.Combinations != 24 || r.NoKernel != 12 || r.Computed > 12 {
			t.Errorf("%s: report %+v, want 24 combinations, 12 without a kernel, at most 12 computed", b, r)
		}
	}
}

// readLines is a text file's lines, without the last newline.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestWaveletFlagsCoverConfig: every option of wavelet.Config has its
// flag, which reaches the Config.
func TestWaveletFlagsCoverConfig(t *testing.T) {
	checkFlagsCover(t, waveletCommand, wavelet.Config{}, func(c *cli.Context) (any, error) { return waveletSpec(c) }, nil)
}
