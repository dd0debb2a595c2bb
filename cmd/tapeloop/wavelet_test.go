package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"math/rand/v2"
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
// output file; the spec's own rules are tested in internal/filejob
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
		{"columns unknown", []string{"--columns", "energy,bogus"}, `--columns: unknown column "bogus"; want some of energy, std, max, wavelet_energy (theta, phi, xi and --stat columns are always written)`},
		{"columns in capitals", []string{"--columns", "ENERGY"}, `--columns: unknown column "ENERGY"; want some of energy, std`},
		{"columns empty", []string{"--columns", ""}, "--columns: empty value: give one, or leave the flag out"},
		{"columns empty name", []string{"--columns", "energy,,std"}, "--columns: an empty name"},
		{"columns only spaces", []string{"--columns", "  "}, "--columns: empty value"},
		{"columns twice", []string{"--columns", "max, max"}, "--columns: max is named twice"},
		{"columns newline", []string{"--columns", "energy\nstd"}, `--columns: unknown column "energy\nstd"`},
		{"columns a statistic not given", []string{"--columns", "energy,l1"}, `--columns: unknown column "l1"`},
		{"columns long", []string{"--columns", strings.Repeat("e", 5000)}, `--columns: unknown column "eeee`},
		{"columns with a bad stat: the stat first", []string{"--columns", "bogus", "--stat", "l1=sum(abs(h))"}, "--stat l1"},
		{"stat named energy", []string{"--stat", "energy=sum(g)"}, `--stat "energy=sum(g)": energy is taken by a built-in column; give the statistic another name`},
		{"stat named std", []string{"--stat", " std = sum(g^2)"}, "std is taken by a built-in column"},
		{"stat named max", []string{"--stat", "max=max(g)*2"}, "max is taken by a built-in column"},
		{"stat named wavelet_energy", []string{"--stat", "wavelet_energy=sum(g)"}, "wavelet_energy is taken by a built-in column"},
		{"stat named like a column left out", []string{"--columns", "std", "--stat", "energy=sum(g^2)"}, "energy is taken by a built-in column"},
		{"stat named xi", []string{"--stat", "xi=sum(g)"}, "xi is taken by a built-in column"},
		{"stat named phi", []string{"--stat", "phi=sum(g)"}, "phi is taken by a built-in column"},
		{"stat named twice", []string{"--stat", "l1=sum(abs(g))", "--stat", "l1=max(abs(g))"}, `--stat "l1=max(abs(g))": l1 is taken by another statistic; give each statistic its own name`},
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

// TestWaveletColumnsWrapMatchesSciPy: with --boundary wrap and --columns
// energy,std no inverse transform runs (the report says so): the energy
// and std come from the spectrum (Parseval's theorem). On a random odd
// volume, with the hat written as a --kernel over a box SciPy builds the
// same way, they agree with scipy.ndimage.convolve(mode='wrap') in float64
// to 10⁻⁶ relative; a kernel with a large mean (a Gaussian, the volume
// shifted by 1) checks the mean's part of std. Each --columns run's CSV
// is the full run's columns, byte for byte, in both boundary modes.
func TestWaveletColumnsWrapMatchesSciPy(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.ndimage")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
from scipy import ndimage
d, kind = sys.argv[1], sys.argv[2]
rng = np.random.default_rng()
shape = tuple(int(s) for s in rng.choice([7, 9, 11, 13], 3))
v = rng.standard_normal(shape).astype(np.float32)
if kind == "gauss":
    v += 1
np.save(d + "/v_" + kind + ".npy", v)
R, a = 3, 1.0
o = np.arange(-R, R + 1, dtype=np.float64)
x, y, z = np.meshgrid(o, o, o, indexing="ij")
rows = []
for th in (0.0, 0.7, 2.2):
    for ph in (0.0, 1.3):
        for xi in (1.0, 2.5):
            ct, st, cp, sp = np.cos(th), np.sin(th), np.cos(ph), np.sin(ph)
            u = x*cp*ct - y*st + z*sp*ct
            w_ = -x*sp + z*cp
            vv = x*cp*st + y*ct + z*sp*st
            q = (vv/a)**2 + (u/(a*xi))**2 + (w_/a)**2
            psi = np.exp(-q/2) if kind == "gauss" else (3 - q)*np.exp(-q/2)
            g = ndimage.convolve(v.astype(np.float64), psi, mode="wrap")
            rows.append((th, ph, xi, (g**2).sum(), g.std()))
np.savetxt(d + "/ref_" + kind + ".csv", np.array(rows), delimiter=",", fmt="%.17g")
`
	for _, kind := range []string{"hat", "gauss"} {
		if out, err := exec.Command(py, "-c", script, dir, kind).CombinedOutput(); err != nil {
			t.Fatalf("scipy: %v\n%s", err, out)
		}
		kernel := "(3 - q)*exp(-q/2)"
		if kind == "gauss" {
			kernel = "exp(-q/2)"
		}
		for _, b := range []string{"wrap", "reflect"} {
			base := []string{"wavelet", "--quiet", "--volume", p("v_" + kind + ".npy"), "--theta", "0,0.7,2.2", "--phi", "0,1.3",
				"--xi", "1,2.5", "--boundary", b, "--kernel", kernel, "--reach", "3", "--stat", "l1=sum(abs(g))"}
			full := p(kind + b + "-full.csv")
			if _, se, code := run(t, append(base, "--out", full)...); code != 0 {
				t.Fatalf("exit %d: %s", code, se)
			}
			fullRows := readLines(t, full)
			for _, cols := range []string{"energy,std", "std, energy", "max", "wavelet_energy,theta", "l1"} {
				out, rep := p(kind+b+"-cols.csv"), p(kind+b+"-cols.json")
				if _, se, code := run(t, append(base, "--columns", cols, "--out", out, "--report", rep)...); code != 0 {
					t.Fatalf("--columns %s: exit %d: %s", cols, code, se)
				}
				got := readLines(t, out)
				header := strings.Split(fullRows[0], ",")
				keep := []int{0, 1, 2}
				named := map[string]bool{"l1": true}
				for _, c := range strings.Split(cols, ",") {
					named[strings.TrimSpace(c)] = true
				}
				for i, name := range header[3:] {
					if named[name] {
						keep = append(keep, 3+i)
					}
				}
				for r, line := range fullRows {
					f := strings.Split(line, ",")
					var want []string
					for _, i := range keep {
						want = append(want, f[i])
					}
					if r >= len(got) || got[r] != strings.Join(want, ",") {
						t.Fatalf("%s %s --columns %s: line %d %q, the full run's columns %q", kind, b, cols, r, got[min(r, len(got)-1)], strings.Join(want, ","))
					}
				}
				var report struct {
					Result struct {
						Columns []string `json:"columns"`
						Passes  struct {
							Sums     string   `json:"sums"`
							Inverse  bool     `json:"inverse_transform"`
							Max      bool     `json:"max"`
							Formulas []string `json:"formulas"`
						} `json:"passes"`
					} `json:"result"`
				}
				if raw, err := os.ReadFile(rep); err != nil || json.Unmarshal(raw, &report) != nil {
					t.Fatalf("report: %v", err)
				}
				ps := report.Result.Passes
				if cols == "energy,std" {
					wantSums, wantInverse := "spectrum", true // the statistic l1 reads the response
					if b == "reflect" {
						wantSums = "response"
					}
					if ps.Sums != wantSums || ps.Inverse != wantInverse || ps.Max || len(ps.Formulas) != 1 || ps.Formulas[0] != "l1" {
						t.Errorf("%s --columns %s: passes %+v", b, cols, ps)
					}
				}
				if cols == "max" && (ps.Sums != "none" || !ps.Max || !ps.Inverse) {
					t.Errorf("%s --columns %s: passes %+v", b, cols, ps)
				}
			}
		}
		// Without a statistic of the user's, energy and std in wrap mode
		// need no inverse transform.
		out, rep := p(kind+"-es.csv"), p(kind+"-es.json")
		if _, se, code := run(t, "wavelet", "--quiet", "--volume", p("v_"+kind+".npy"), "--theta", "0,0.7,2.2", "--phi", "0,1.3",
			"--xi", "1,2.5", "--boundary", "wrap", "--kernel", kernel, "--reach", "3", "--columns", "energy,std", "--out", out, "--report", rep); code != 0 {
			t.Fatalf("exit %d: %s", code, se)
		}
		raw, err := os.ReadFile(rep)
		if err != nil {
			t.Fatal(err)
		}
		if want := `"passes":{"sums":"spectrum","inverse_transform":false,"max":false,"formulas":[]}`; !strings.Contains(strings.Join(strings.Fields(string(raw)), ""), want) {
			t.Errorf("report %s, want %s", raw, want)
		}
		lines, want := readLines(t, out), readCSV(t, p("ref_"+kind+".csv"), false)
		if len(lines) != 13 || len(want) != 12 || lines[0] != "theta,phi,xi,energy,std" {
			t.Fatalf("%d lines (header %q) and %d rows", len(lines), lines[0], len(want))
		}
		worst := 0.0
		for i, w := range want {
			f := strings.Split(lines[i+1], ",")
			for j := range 5 {
				g, err := strconv.ParseFloat(f[j], 64)
				if err != nil {
					t.Fatal(err)
				}
				d := math.Abs(g - w[j])
				if j >= 3 {
					worst = max(worst, d/math.Abs(w[j]))
				}
				if !(d <= 1e-6*math.Abs(w[j])) {
					t.Errorf("%s: row %d column %d: %v, scipy %v", kind, i, j, g, w[j])
				}
			}
		}
		t.Logf("%s: largest relative difference from SciPy %.2g", kind, worst)
	}
}

// TestWaveletZeroKernel: a --kernel formula that is 0 for some
// combinations writes their rows (a zero response: every statistic 0) and
// names them in one warning line, in both boundary modes, with energy alone
// asked too; the report counts them; a kernel that is not 0 anywhere gives
// no such line.
func TestWaveletZeroKernel(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	kernel := "where(theta > 1, 0, exp(-2*(x*x + y*y/(xi*xi) + z*z)))"
	for _, b := range []string{"reflect", "wrap"} {
		for _, cols := range []string{"energy,std,max,wavelet_energy", "energy"} {
			base := []string{"wavelet", "--size", "17x19x15", "--seed", "5", "--theta", "0.3,1.2,2", "--phi", "0,0.7",
				"--xi", "1,2", "--boundary", b, "--columns", cols}
			_, stderr, code := run(t, append(base, "--kernel", kernel, "--out", p("z.csv"), "--report", p("z.json"))...)
			if code != 0 {
				t.Fatalf("%s, %s: exit %d: %s", b, cols, code, stderr)
			}
			want := "tapeloop: warning: 8 of 12 combinations have a kernel that is 0 at every sample (the first: θ = 1.2, φ = 0, ξ = 1): their statistics are those of a response of zeros; check --kernel\n"
			if !strings.Contains(stderr, want) {
				t.Errorf("%s, %s: stderr %q, want the line %q", b, cols, stderr, want)
			}
			lines := readLines(t, p("z.csv"))
			if len(lines) != 13 {
				t.Fatalf("%s, %s: %d lines, want 13", b, cols, len(lines))
			}
			for _, line := range lines[1:] {
				f := strings.Split(line, ",")
				theta, _ := strconv.ParseFloat(f[0], 64)
				e, _ := strconv.ParseFloat(f[3], 64)
				if (theta > 1) != (e == 0) {
					t.Errorf("%s, %s: row %q: energy %g at θ = %g", b, cols, line, e, theta)
				}
			}
			var rep struct {
				Result struct {
					ZeroKernel int `json:"zero_kernel"`
				} `json:"result"`
			}
			if data, err := os.ReadFile(p("z.json")); err != nil || json.Unmarshal(data, &rep) != nil || rep.Result.ZeroKernel != 8 {
				t.Errorf("%s, %s: report's zero_kernel %d (%v), want 8", b, cols, rep.Result.ZeroKernel, err)
			}
			_, stderr, code = run(t, append(base, "--kernel", "exp(-2*(x*x + y*y/(xi*xi) + z*z))", "--out", p("n.csv"))...)
			if code != 0 || strings.Contains(stderr, "warning") {
				t.Errorf("%s, %s: a kernel nowhere 0: exit %d, stderr %q; want 0 and no warning", b, cols, code, stderr)
			}
		}
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
		if want := "tapeloop: warning: 12 combinations have no kernel (the first: θ = 0, φ = 0, ξ = 0: wavelet: stretch ξ = 0 must be positive); their rows hold NaN\n"; !strings.Contains(stderr, want) {
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

// TestWaveletNarrowHatsMatchSciPy: hats narrower than a voxel or two (a
// or ξ small, where the closed form would sum ever more aliases) are
// sampled: the sweep ends, and matches SciPy's convolution with the hat
// sampled from its definition, in both boundary modes; a scale so small
// that q overflows to +Inf gives the hat's centre alone, 3, not NaN.
func TestWaveletNarrowHatsMatchSciPy(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.ndimage")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
from scipy import ndimage
d, mode, a = sys.argv[1], sys.argv[2], float(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from wavelet_scipy import hat
v = np.load(d + "/v.npy")
rows = []
for th in (0.0, 0.7):
    for ph in (0.0, 1.3):
        for xi in (1e-20, 0.3, 1.0):
            psi = hat(a, th, ph, xi)
            g = ndimage.convolve(v.astype(np.float64), psi, mode=mode)
            rows.append((th, ph, xi, (g**2).sum(), g.std(), g.max(), (psi**2).sum()))
np.savetxt(d + "/ref.csv", np.array(rows), delimiter=",")
`
	rng := rand.New(rand.NewPCG(2003, 2004))
	v := make([]float64, 9*13*7)
	for i := range v {
		v[i] = float64(float32(rng.NormFloat64()))
	}
	writeNpy(t, p("v.npy"), []int{9, 13, 7}, v)
	for _, mode := range []string{"reflect", "wrap"} {
		for _, a := range []string{"1e-20", "0.2", "0.35", "1"} {
			if out, err := exec.Command(py, "-c", script, dir, mode, a, filepath.Join("..", "..", "bench", "peers")).CombinedOutput(); err != nil {
				t.Fatalf("scipy: %v\n%s", err, out)
			}
			out := p("stats.csv")
			_, se, code := run(t, "wavelet", "--quiet", "--volume", p("v.npy"), "-a", a, "--theta", "0,0.7", "--phi", "0,1.3",
				"--xi", "1e-20,0.3,1", "--boundary", mode, "--out", out)
			if code != 0 {
				t.Fatalf("%s, a %s: exit %d: %s", mode, a, code, se)
			}
			got, want := readCSV(t, out, true), readCSV(t, p("ref.csv"), false)
			if len(got) != len(want) || len(got) != 12 {
				t.Fatalf("%s, a %s: %d rows, reference %d", mode, a, len(got), len(want))
			}
			for i := range want {
				for j := range 7 {
					if d := math.Abs(got[i][j] - want[i][j]); !(d <= 1e-4*math.Abs(want[i][j])+1e-9) {
						t.Errorf("%s, a %s, row %d column %d: %v, scipy %v", mode, a, i, j, got[i][j], want[i][j])
					}
				}
			}
		}
	}
	so, se, code := run(t, "wavelet", "--quiet", "--volume", p("v.npy"), "-a", "1e-300", "--theta", "0.7", "--phi", "1.3",
		"--xi", "1,1e-300", "--columns", "wavelet_energy")
	if code != 0 || so != "theta,phi,xi,wavelet_energy\n0.7,1.3,1,9\n0.7,1.3,1e-300,9\n" {
		t.Errorf("a = 1e-300: exit %d, stdout %q, stderr %q", code, so, se)
	}
}
