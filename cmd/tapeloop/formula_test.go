package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

// The users' formulas against NumPy evaluating the same expressions on
// fresh random inputs of odd sizes: relative error at most 1e-5 in
// float32 and 1e-12 in float64 (the norm of the difference over the norm
// of the reference).

// formulaScript writes the inputs and NumPy's results into a directory.
const formulaScript = `
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(int(sys.argv[2]))
s = 3.7

# Affinity: (N, H, W) images, float32 and float64.
x64 = rng.uniform(0.05, 1.0, size=(257, 5, 7))
x32 = x64.astype(np.float32)
np.save(d + "/img64.npy", x64)
np.save(d + "/img32.npy", x32)
def pairs(x, f):
    x = x.reshape(len(x), -1)
    return f(x[:, None, :], x[None, :, :])   # (N, N, D) → (N, N)
S = lambda v: v.sum(-1)
aff = {
    "l1": lambda a, b: -S(np.abs(a - b)),
    "gauss": lambda a, b: np.exp(-S((a - b) ** 2) / (2 * s ** 2)),
    "ruzicka": lambda a, b: S(np.minimum(a, b)) / S(np.maximum(a, b)),
    "pearson": lambda a, b: S((a - a.mean(-1, keepdims=True)) * (b - b.mean(-1, keepdims=True))) /
        (np.linalg.norm(a - a.mean(-1, keepdims=True), axis=-1) * np.linalg.norm(b - b.mean(-1, keepdims=True), axis=-1)),
    "asym": lambda a, b: S(a ** 2) - 2 * S(a * b) + b.max(-1),
}
for name, f in aff.items():
    np.save(d + "/aff_%s_64.npy" % name, pairs(x64, f))
    np.save(d + "/aff_%s_32.npy" % name, pairs(x32, f).astype(np.float64))

# Interpolation: the cubic scheme of the original case, then the reductions.
M, G, N = 29, 41, 5003
a0, dx = -0.75, 0.0613
f = rng.standard_normal((M, G)) + 0.2
ub = a0 + (G + 1) * dx
q = rng.uniform(a0 - 0.3, ub + 0.3, N)
np.save(d + "/f.npy", f)
np.save(d + "/x.npy", q)
np.save(d + "/f32.npy", f.astype(np.float32))
np.save(d + "/x32.npy", q.astype(np.float32))
A = np.array([-1/16, 9/16, 9/16, -1/16]); B = np.array([1/24, -9/8, 9/8, -1/24])
C = np.array([1/4, -1/4, -1/4, 1/4]);     D = np.array([-1/6, 1/2, -1/2, 1/6])
def values(f, x):
    fp = np.pad(f, ((0, 0), (1, 1)))
    xc = np.clip(x, a0, ub) - a0
    ix = np.floor(xc / dx)
    t = (xc / dx - (ix + 0.5))[:, None]
    w = A + t * (B + t * (C + t * D))
    start = np.clip(ix.astype(np.int64), 0, G - 2)
    return np.einsum("mnk,nk->nm", fp[:, start[:, None] + np.arange(4)], w)
red = {
    "max": lambda v, x: v.max(1),
    "meanexp": lambda v, x: np.exp(-v).mean(1),
    "dist": lambda v, x: np.sum((v - x[:, None]) ** 2, 1) / s,
    "where": lambda v, x: np.sum(np.where(v > 0.5, v, 0), 1) + np.minimum(x, 0.1),
}
for tag, ff, xx in (("64", f, q), ("32", f.astype(np.float32), q.astype(np.float32))):
    v = values(ff.astype(np.float64), xx.astype(np.float64))
    if tag == "32":
        v = v.astype(np.float32)
    for name, r in red.items():
        np.save(d + "/red_%s_%s.npy" % (name, tag), np.asarray(r(v, xx), dtype=np.float64))

# DRR: a volume in HU and the attenuation the --mu formula gives.
h = rng.uniform(-1000, 1500, size=(23, 19, 17)).astype(np.float32)
np.save(d + "/hu.npy", h)
mu = np.where(h < -900, 0, 0.02 * (1 + h.astype(np.float64) / 1000)).astype(np.float32)
np.save(d + "/mu.npy", mu)
`

func formulaInputs(t *testing.T) string {
	t.Helper()
	py := testutil.Python(t, "numpy")
	dir := t.TempDir()
	if out, err := exec.Command(py, "-c", formulaScript, dir, "16001").CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	return dir
}

// relErr is ‖got − want‖ / ‖want‖, with NaN when either has NaN.
func relErr(got, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range want {
		num += (got[i] - want[i]) * (got[i] - want[i])
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

func tolerance(dtype string) float64 {
	if dtype == "float64" {
		return 1e-12
	}
	return 1e-5
}

func TestAffinityFormulasMatchNumPy(t *testing.T) {
	dir := formulaInputs(t)
	p := func(n string) string { return filepath.Join(dir, n) }
	formulas := map[string]string{
		"l1":      "-sum(abs(a-b))",
		"gauss":   "exp(-sum((a-b)^2)/(2*s^2))",
		"ruzicka": "sum(min(a,b))/sum(max(a,b))",
		"pearson": "sum((a-mean(a))*(b-mean(b)))/(norm(a-mean(a))*norm(b-mean(b)))",
		"asym":    "sum(a^2) - 2*dot(a, b) + max(b)",
	}
	for name, src := range formulas {
		for _, dt := range []struct{ dtype, tag string }{{"float32", "32"}, {"float64", "64"}} {
			for _, method := range []string{"auto", "direct"} {
				// The whole matrix in memory (symmetric formulas computed
				// once per pair), and rows streamed with top-k beside.
				for _, mode := range [][]string{{"--block", "29"}, {"--mem-limit", "300KiB", "--block", "17"}} {
					t.Run(fmt.Sprintf("%s/%s/%s/%v", name, dt.dtype, method, mode), func(t *testing.T) {
						out := p(fmt.Sprintf("A_%s_%s_%s_%d.npy", name, dt.tag, method, len(mode)))
						args := append([]string{"affinity", "-q", "--images", p("img" + dt.tag + ".npy"), "--dtype", dt.dtype,
							"--formula", src, "--method", method, "--out", out}, mode...)
						if strings.Contains(src, "s^") {
							args = append(args, "--param", "s=3.7")
						}
						args = append(args, "--report", out+".json")
						if _, se, code := run(t, args...); code != 0 {
							t.Fatalf("exit %d: %s", code, se)
						}
						var rep struct{ Result struct{ Symmetric bool } }
						b, _ := os.ReadFile(out + ".json")
						json.Unmarshal(b, &rep)
						if sym := len(mode) == 2 && name != "asym"; rep.Result.Symmetric != sym {
							t.Errorf("symmetric mode %v, want %v", rep.Result.Symmetric, sym)
						}
						_, got, err := npy.ReadAll64(out)
						if err != nil {
							t.Fatal(err)
						}
						_, want, _ := npy.ReadAll64(p("aff_" + name + "_" + dt.tag + ".npy"))
						tol := tolerance(dt.dtype)
						if method == "auto" && (name == "gauss" || name == "pearson" || name == "asym") {
							// From dot products: Σa² + Σb² − 2a·b loses what the
							// difference would have kept; in float64 that is
							// still far below float32's precision.
							tol = map[string]float64{"float32": 1e-5, "float64": 1e-10}[dt.dtype]
						}
						if e := relErr(got, want); !(e <= tol) {
							t.Errorf("relative error %.3g > %g", e, tol)
						}
					})
				}
			}
		}
	}
	// The built-in metric and the formula that writes it agree.
	l1 := p("builtin_l1.npy")
	if _, se, code := run(t, "affinity", "-q", "--images", p("img32.npy"), "--metric", "l1", "--out", l1); code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	_, b, _ := npy.ReadAll64(l1)
	_, f, _ := npy.ReadAll64(p("A_l1_32_auto_2.npy"))
	if e := relErr(f, b); e > 1e-6 {
		t.Errorf("--formula -sum(abs(a-b)) and --metric l1 differ by %.3g", e)
	}
}

func TestInterpFormulasMatchNumPy(t *testing.T) {
	dir := formulaInputs(t)
	p := func(n string) string { return filepath.Join(dir, n) }
	reductions := map[string]string{
		"max":     "max(v)",
		"meanexp": "mean(exp(-v))",
		"dist":    "sum((v-x)^2)/s",
		"where":   "sum(where(v > 0.5, v, 0)) + min(x, 0.1)",
	}
	for name, src := range reductions {
		for _, dt := range []struct{ dtype, tag string }{{"float32", "32"}, {"float64", "64"}} {
			t.Run(name+"/"+dt.dtype, func(t *testing.T) {
				out := p("R_" + name + "_" + dt.tag + ".npy")
				args := []string{"interp", "-q", "--f", p("f" + strings.TrimPrefix(dt.tag, "64") + ".npy"),
					"--x", p("x" + strings.TrimPrefix(dt.tag, "64") + ".npy"), "--a", "-0.75", "--dx", "0.0613",
					"--reduce", src, "--dtype", dt.dtype, "--batch", "777", "--out", out}
				if strings.Contains(src, "/s") {
					args = append(args, "--param", "s=3.7")
				}
				if _, se, code := run(t, args...); code != 0 {
					t.Fatalf("exit %d: %s", code, se)
				}
				_, got, err := npy.ReadAll64(out)
				if err != nil {
					t.Fatal(err)
				}
				_, want, _ := npy.ReadAll64(p("red_" + name + "_" + dt.tag + ".npy"))
				if e := relErr(got, want); !(e <= tolerance(dt.dtype)) {
					t.Errorf("relative error %.3g > %g", e, tolerance(dt.dtype))
				}
			})
		}
	}
	// sum(v^2) is the built-in sumsq: the same numbers, bit for bit.
	for _, r := range []string{"sumsq", "sum(v^2)"} {
		if _, se, code := run(t, "interp", "-q", "--f", p("f.npy"), "--x", p("x.npy"), "--a", "-0.75", "--dx", "0.0613",
			"--reduce", r, "--out", p("sq_"+r+".npy")); code != 0 {
			t.Fatalf("exit %d: %s", code, se)
		}
	}
	a, _ := os.ReadFile(p("sq_sumsq.npy"))
	b, _ := os.ReadFile(p("sq_sum(v^2).npy"))
	if string(a) != string(b) {
		t.Error("--reduce 'sum(v^2)' differs from --reduce sumsq")
	}
}

func TestDRRFormulasMatchNumPy(t *testing.T) {
	dir := formulaInputs(t)
	p := func(n string) string { return filepath.Join(dir, n) }
	geo := []string{"--orbit", "5", "--detector", "31x27", "--pixel", "1.3", "--sdd", "300", "--sid", "150", "--spacing", "1.1,0.9,1.3"}
	render := func(out string, args ...string) []float64 {
		t.Helper()
		a := append(append([]string{"drr", "-q", "--out", p(out)}, geo...), args...)
		if _, se, code := run(t, a...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, se)
		}
		_, img, err := npy.ReadAll64(p(out + "/drr.npy"))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	// --mu maps the volume as NumPy does: the same images as the volume
	// NumPy mapped.
	want := render("ref", "--volume", p("mu.npy"))
	got := render("mu", "--volume", p("hu.npy"), "--mu", "where(h < -900, 0, 0.02*(1+h/1000))")
	if e := relErr(got, want); !(e <= 1e-5) {
		t.Errorf("--mu: relative error %.3g > 1e-5", e)
	}
	// --post against NumPy's exp(-p) and 1 − exp(−p) of the line integrals.
	for _, post := range []struct {
		src string
		f   func(float64) float64
	}{{"exp(-p)", func(x float64) float64 { return math.Exp(-x) }}, {"1-exp(-p)", func(x float64) float64 { return 1 - math.Exp(-x) }}} {
		img := render("post", "--volume", p("mu.npy"), "--post", post.src)
		ref := make([]float64, len(want))
		for i, x := range want {
			ref[i] = float64(float32(post.f(float64(float32(x)))))
		}
		if e := relErr(img, ref); !(e <= 1e-5) {
			t.Errorf("--post %s: relative error %.3g > 1e-5", post.src, e)
		}
	}
}

func TestWaveletFormulas(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.ndimage")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
from scipy import ndimage
d = sys.argv[1]
rng = np.random.default_rng(16003)
v = rng.standard_normal((11, 9, 13)).astype(np.float32)
np.save(d + "/v.npy", v)
a = 1.3
rows = []
for th in (0.0, 0.9):
    for ph in (0.4,):
        for xi in (1.0, 1.7):
            c, s, cp, sp = np.cos(th), np.sin(th), np.cos(ph), np.sin(ph)
            R = np.array([[cp * c, -s, sp * c], [cp * s, c, sp * s], [-sp, 0, cp]])
            dd = np.array([(a * xi) ** 2, a * a, a * a])
            # A box past the kernel's reach: e^(-64/(2a²)) is 6e-9 of its peak.
            x, y, z = np.meshgrid(*[np.arange(-8, 9)] * 3, indexing="ij")
            u = R[0, 0] * x + R[0, 1] * y + R[0, 2] * z
            w = R[2, 0] * x + R[2, 1] * y + R[2, 2] * z
            psi = np.exp(-(x**2 + y**2 + z**2) / (2 * a * a)) * (np.cos(u / xi) - 0.1 * (w > 0))
            g = ndimage.convolve(v.astype(np.float64), psi, mode="reflect")
            rows.append((th, ph, xi, (g**2).sum(), g.std(), g.max(), (psi**2).sum(), np.abs(g).sum(), g.mean(), ((g - g.mean())**4).mean()))
np.savetxt(d + "/ref.csv", np.array(rows), delimiter=",")
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("scipy: %v\n%s", err, out)
	}
	out := p("stats.csv")
	_, se, code := run(t, "wavelet", "-q", "--volume", p("v.npy"), "--a", "1.3", "--theta", "0,0.9", "--phi", "0.4", "--xi", "1,1.7",
		"--kernel", "exp(-(x^2+y^2+z^2)/(2*a^2))*(cos(u/xi) - c*(w > 0))", "--param", "c=0.1",
		"--stat", "l1=sum(abs(g))", "--stat", "m=mean(g)", "--stat", "k4=mean((g-mean(g))^4)", "--batch", "3", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	got := readCSV(t, out, true)
	want := readCSV(t, p("ref.csv"), false)
	if len(got) != 4 || len(want) != 4 || len(got[0]) != 10 {
		t.Fatalf("%d rows of %d columns, reference %d rows", len(got), len(got[0]), len(want))
	}
	for i := range want {
		for j := range 10 {
			// float32 transforms against SciPy's float64 direct
			// convolution: 1e-4, as the built-in statistics' test.
			if d := math.Abs(got[i][j] - want[i][j]); d > 1e-4*math.Abs(want[i][j])+1e-6 {
				t.Errorf("row %d column %d: %v, scipy %v", i, j, got[i][j], want[i][j])
			}
		}
	}
	// The hat written as a formula is sampled and transformed (over
	// --reach 13: its own reach is past this small volume); the built-in's
	// transform is computed in closed form (the hat on the whole grid, not
	// cut at its support box): the same statistics within 10⁻⁵
	// (combinations with distinct kernels; the built-in computes a kernel
	// shared by several combinations once, a formula every time).
	a, b := p("builtin.csv"), p("formula.csv")
	for _, c := range [][]string{{"--out", a}, {"--out", b, "--kernel", "(3 - q)*exp(-q/2)", "--reach", "13"}} {
		args := append([]string{"wavelet", "-q", "--volume", p("v.npy"), "--theta", "0:pi:3", "--phi", "0.4", "--xi", "2"}, c...)
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, se)
		}
	}
	x, y := readCSV(t, a, true), readCSV(t, b, true)
	if len(x) != 3 || len(y) != 3 {
		t.Fatalf("%d and %d rows, want 3", len(x), len(y))
	}
	for i := range x {
		for j := range x[i] {
			if d := math.Abs(x[i][j] - y[i][j]); d > 1e-5*math.Abs(y[i][j]) || math.IsNaN(d) {
				t.Errorf("row %d column %d: built-in %v, the hat as a formula %v", i, j, x[i][j], y[i][j])
			}
		}
	}
	// Shared kernels: the round hat (ξ = 1) for every θ and φ, and θ and
	// θ + π (the same stretched axis) computed once by the built-in, every
	// time by the formula: the same statistics, to rounding.
	a2, b2 := p("builtin2.csv"), p("formula2.csv")
	for _, c := range [][]string{{"--out", a2}, {"--out", b2, "--kernel", "(3 - q)*exp(-q/2)", "--reach", "13"}} {
		args := append([]string{"wavelet", "-q", "--volume", p("v.npy"), "--theta", "0.3,0.9,3.4415926535897931", "--phi", "0,0.7",
			"--xi", "1,2", "--report", c[1] + ".json"}, c...)
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, se)
		}
	}
	var rep struct {
		Result struct{ Combinations, Computed int }
	}
	rb, _ := os.ReadFile(a2 + ".json")
	json.Unmarshal(rb, &rep)
	// 12 combinations: the 6 round ones share a kernel; θ = 0.3 and
	// 0.3 + π share their axis for each φ: 1 + 4 kernels.
	if rep.Result.Combinations != 12 || rep.Result.Computed != 5 {
		t.Errorf("%d combinations, %d kernels computed; want 12 and 5", rep.Result.Combinations, rep.Result.Computed)
	}
	g2, w2 := readCSV(t, a2, true), readCSV(t, b2, true)
	for i := range w2 {
		for j := range 7 {
			if d := math.Abs(g2[i][j] - w2[i][j]); d > 1e-6*math.Abs(w2[i][j])+1e-12 {
				t.Errorf("row %d column %d: %v computed once, %v every time", i, j, g2[i][j], w2[i][j])
			}
		}
	}
	// A statistic of the built-in energy's formula is a column of its own,
	// after the built-in ones, with the built-in energy's value.
	e := p("energy.csv")
	args := []string{"wavelet", "-q", "--volume", p("v.npy"), "--theta", "0:pi:3", "--phi", "0.4", "--xi", "2",
		"--stat", "e2=sum(g^2)", "--stat", "l1=sum(abs(g))", "--out", e}
	if _, se, code := run(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	head, _ := os.ReadFile(e)
	if h := strings.SplitN(string(head), "\n", 2)[0]; h != "theta,phi,xi,energy,std,max,wavelet_energy,e2,l1" {
		t.Errorf("header %q", h)
	}
	built, mine := readCSV(t, a, true), readCSV(t, e, true)
	for i := range built {
		if d := math.Abs(mine[i][7] - built[i][3]); d > 1e-6*built[i][3] {
			t.Errorf("row %d: e2=sum(g^2) is %v, the built-in energy %v", i, mine[i][7], built[i][3])
		}
	}
}

// TestAffinityFormulaShards: a formula's shards merge into the matrix of
// one run, and shards of two formulas (or of one formula with two
// parameter values) are refused.
func TestAffinityFormulaShards(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	base := []string{"affinity", "-q", "--n", "37", "--height", "3", "--width", "5", "--formula", "exp(-sum((a-b)^2)/(2*s^2))"}
	shard := func(out, index, s string) {
		t.Helper()
		args := append(append([]string{}, base...), "--param", "s="+s, "--shard", index+"/2", "--out", p(out))
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, se)
		}
	}
	shard("s0.npz", "0", "2")
	shard("s1.npz", "1", "2")
	shard("t1.npz", "1", "3")
	if _, se, code := run(t, "merge", "--out", p("m.npy"), p("s0.npz"), p("s1.npz")); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, se)
	}
	one := append(append([]string{}, base...), "--param", "s=2", "--out", p("one.npy"))
	if _, se, code := run(t, one...); code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	_, m, _ := npy.ReadAll64(p("m.npy"))
	_, o, _ := npy.ReadAll64(p("one.npy"))
	if e := relErr(m, o); e != 0 {
		t.Errorf("merged shards differ from one run by %.3g", e)
	}
	_, se, code := run(t, "merge", "--out", p("bad.npy"), p("s0.npz"), p("t1.npz"))
	if code != 1 || !strings.Contains(se, "different run") || !strings.Contains(se, "s=3") {
		t.Errorf("shards of two parameter values: exit %d: %s", code, se)
	}
	// A formula that gives NaN for some pairs: its shards merge into the
	// matrix its run without shards writes, NaN in the same places.
	nan := []string{"affinity", "-q", "--n", "37", "--height", "3", "--width", "5", "--formula", "log(sum(a*b) - 7)", "--dtype", "float64"}
	for i := range 2 {
		args := append(append([]string{}, nan...), "--shard", strconv.Itoa(i)+"/2", "--out", p("nan"+strconv.Itoa(i)+".npz"))
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, se)
		}
	}
	if _, se, code := run(t, "merge", "--out", p("nan.npy"), p("nan0.npz"), p("nan1.npz")); code != 0 {
		t.Fatalf("merge of a formula's shards holding NaN: exit %d: %s", code, se)
	}
	if _, se, code := run(t, append(append([]string{}, nan...), "--out", p("nanone.npy"))...); code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	_, m, _ = npy.ReadAll64(p("nan.npy"))
	_, o, _ = npy.ReadAll64(p("nanone.npy"))
	nans := 0
	for i := range o {
		if math.IsNaN(o[i]) {
			nans++
		}
		if math.Float64bits(m[i]) != math.Float64bits(o[i]) && !(math.IsNaN(m[i]) && math.IsNaN(o[i])) {
			t.Fatalf("merged shards differ from one run at %d: %v, %v", i, m[i], o[i])
		}
	}
	if nans == 0 || nans == len(o) {
		t.Errorf("%d of %d values NaN: the case should have some, not all", nans, len(o))
	}
}

// TestWaveletKernelReach: a --kernel is sampled over its own reach, not the
// hat's box. A wide Gaussian (σ = 5 voxels, reach 28) against NumPy's
// convolution of the volume, extended half-sample symmetric as
// scipy.ndimage's reflect mode, with the kernel sampled on a box past its
// reach, by FFT; Σ ψ² against its analytic sum over the lattice. The same
// kernel on a volume too small for it is refused, naming its reach, and
// with --reach it is sampled over that box, as NumPy does with the same box.
func TestWaveletKernelReach(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.signal")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
from scipy import signal
d = sys.argv[1]
rng = np.random.default_rng(16011)
def ref(v, h, name):
    x, y, z = np.meshgrid(*[np.arange(-k, k + 1) for k in h], indexing="ij")
    psi = np.exp(-(x**2 + y**2 + z**2) / 50.0) * (1 + 0.2 * np.cos(0.7 * y))
    e = np.pad(v.astype(np.float64), [(k, k) for k in h], mode="symmetric")
    g = signal.fftconvolve(e, psi, mode="valid")
    assert g.shape == v.shape
    np.savetxt(d + "/" + name, [[(g**2).sum(), g.std(), g.max(), (psi**2).sum()]], delimiter=",")
v = rng.standard_normal((40, 37, 44)).astype(np.float32)
np.save(d + "/big.npy", v)
ref(v, (36, 36, 36), "big.csv")
s = rng.standard_normal((21, 19, 17)).astype(np.float32)
np.save(d + "/small.npy", s)
ref(s, (6, 6, 6), "small.csv")
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	kernel := "exp(-(x^2+y^2+z^2)/50)*(1 + 0.2*cos(0.7*y))"
	check := func(name string, extra ...string) {
		t.Helper()
		out := p(name + "-got.csv")
		args := append([]string{"wavelet", "-q", "--volume", p(name + ".npy"), "--theta", "0", "--phi", "0", "--xi", "1",
			"--kernel", kernel, "--out", out}, extra...)
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, se)
		}
		got, want := readCSV(t, out, true)[0][3:], readCSV(t, p(name+".csv"), false)[0]
		for j := range want {
			if d := math.Abs(got[j] - want[j]); !(d <= 1e-5*math.Abs(want[j])) {
				t.Errorf("%s: statistic %d is %v, NumPy %v", name, j, got[j], want[j])
			}
		}
		if name == "big" {
			// Σ ψ² of the plain Gaussian part bounds the sampled energy:
			// over the lattice it is (Σ_k e^{-k²/25})³, about (5√π)³.
			var s1 float64
			for k := -60; k <= 60; k++ {
				s1 += math.Exp(-float64(k*k) / 25)
			}
			if e := got[3]; !(e > s1*s1*s1) {
				t.Errorf("Σ ψ² = %v, not above the Gaussian's %v: the kernel was cut short", e, s1*s1*s1)
			}
		}
	}
	check("big")
	_, se, code := run(t, "wavelet", "-q", "--volume", p("small.npy"), "--theta", "0", "--phi", "0", "--xi", "1",
		"--kernel", kernel, "--out", p("refused.csv"))
	want := "tapeloop: --kernel: θ = 0, φ = 0, ξ = 1: it does not decay within the volume: along its third (z) axis, 16 voxels from its centre"
	if code != 1 || !strings.HasPrefix(se, want) || strings.Count(se, "\n") != 1 {
		t.Errorf("a kernel wider than the volume: exit %d, stderr %q; want 1 and %q…", code, se, want)
	}
	if _, err := os.Stat(p("refused.csv")); err == nil {
		t.Error("refused, but refused.csv was written")
	}
	check("small", "--reach", "6")
}

// TestAffinityHistogramsMatchNumPy: histogram intersection and a joint
// histogram's term, written with named subexpressions, per pair of
// images (values outside the range included), against NumPy's histogram
// and histogram2d; and the same with floor, round and mod.
func TestAffinityHistogramsMatchNumPy(t *testing.T) {
	py := testutil.Python(t, "numpy")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(16021)
x = rng.uniform(-0.2, 1.1, size=(41, 5, 7)).astype(np.float32)
np.save(d + "/x.npy", x)
x = x.reshape(len(x), -1).astype(np.float64)
H = lambda v: np.histogram(v, 8, (0, 1))[0].astype(np.float64)
H2 = lambda u, v: np.histogram2d(u, v, 4, [[0, 1], [0, 1]])[0]
np.save(d + "/hist.npy", np.array([[np.minimum(H(a), H(b)).sum() / H(a).sum() + 0.01 * (H2(a, b) * H2(b, a)).sum() for b in x] for a in x]))
np.save(d + "/frm.npy", np.array([[np.mean(np.round(4 * a) == np.floor(4 * b)) + np.sum(np.mod(a - b, 0.3)) for b in x] for a in x]))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	for _, c := range []struct{ name, src string }{
		{"hist", "ha = hist(a, 0, 1, 8); hb = hist(b, 0, 1, 8); sum(min(ha, hb))/sum(ha) + 0.01*sum(hist2(a, b, 0, 1, 4)*hist2(b, a, 0, 1, 4))"},
		{"frm", "d = a - b; mean(round(4*a) == floor(4*b)) + sum(mod(d, 0.3))"},
	} {
		out := p(c.name + "-got.npy")
		if _, se, code := run(t, "affinity", "-q", "--images", p("x.npy"), "--formula", c.src, "--block", "7", "--out", out); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, se)
		}
		_, got, err := npy.ReadAll64(out)
		if err != nil {
			t.Fatal(err)
		}
		_, want, _ := npy.ReadAll64(p(c.name + ".npy"))
		if e := relErr(got, want); !(e <= 1e-5) {
			t.Errorf("%s: relative error %.3g > 1e-5", c.name, e)
		}
	}
}
