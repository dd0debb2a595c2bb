package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

// skern3 is the stretched Mexican hat of a NumPy program as its author
// wrote it, with named subexpressions, over the coordinates X, Y, Z of the
// program's grid of 64 voxels a side (below).
const skern3 = `X = where(x == 31, 32, x); Y = where(y == 31, 32, y); Z = where(z == 31, 32, z);
rT = X*cos(phi)*cos(theta) - Y*sin(theta) + Z*sin(phi)*cos(theta);
rp = X*cos(phi)*sin(theta) + Y*cos(theta) + Z*sin(phi)*sin(theta);
rp2 = -1*X*sin(phi) + Z*cos(phi);
A = (3-(rp/a)^2 - (1/xi^2)*(rT/a)^2 - (rp2/a)^2);
B = exp((-1/2)*((rp/a)^2 + (1/xi^2)*(rT/a)^2 + (rp2/a)^2));
A*B`

// TestWaveletSeedSweep runs a wavelet sweep as its author's NumPy program
// does and checks the author's numbers. The program makes its kernel,
// skern3, with np.meshgrid(x, y, z) (indexing "xy": x along the volume's
// second axis) over a grid the size of the volume, x = np.uint16(
// np.linspace(0, w, w)) centred by subtracting max(x)/2, and convolves with
// scipy.ndimage.convolve (reflect); its statistics are Σ G², √var G,
// max G, and the response weighed by 1/√(ξ² + 2a²). The grid of
// np.uint16(np.linspace(0, 64, 64)) is the integers 0 … 62 and then 64:
// from its centre 32, the offsets −32 … 30 and then 32, written here as
// where(x == 31, 32, x). Its parameter list has ξ = 0, where the program's
// kernel is NaN: the row holds NaN.
//
// The reference is the author's own code (NumPy for CuPy) on a 64³
// volume, convolved by FFT on the volume extended as ndimage's reflect,
// which the script checks against scipy.ndimage.convolve itself on a
// small volume first.
func TestWaveletSeedSweep(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.signal", "scipy.ndimage")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
from scipy import signal, ndimage
d = sys.argv[1]

def skern3(x, y, z, a, theta, phi, xi):
    # stretched mexican hat wavelet, as the author wrote it
    x = x - np.max(x)/2
    y = y - np.max(y)/2
    z = z - np.max(z)/2
    rT = x*np.cos(phi)*np.cos(theta) - y*np.sin(theta) + z*np.sin(phi)*np.cos(theta)
    rp = x*np.cos(phi)*np.sin(theta) + y*np.cos(theta) + z*np.sin(phi)*np.sin(theta)
    rp2 = -1*x*np.sin(phi) + z*np.cos(phi)
    A = (3-(rp/a)**2 - (1/xi**2)*(rT/a)**2 - (rp2/a)**2)
    B = np.exp((-1/2)*((rp/a)**2 + (1/xi**2)*(rT/a)**2 + (rp2/a)**2))
    return A*B

def convolve(v, k):
    # scipy.ndimage.convolve(v, k) (mode reflect), by FFT.
    pad = [(m - 1 - m//2, m//2) for m in k.shape]
    return signal.fftconvolve(np.pad(v, pad, mode="symmetric"), k, mode="valid")

rng = np.random.default_rng(20260412)
s = rng.random((9, 12, 7))
k = rng.standard_normal((12, 9, 8))
assert np.allclose(convolve(s, k), ndimage.convolve(s, k), rtol=1e-10, atol=1e-10)

fib_sum_log = rng.random((64, 64, 64)).astype(np.float32)
np.save(d + "/v.npy", fib_sum_log)
shape_im = np.array(fib_sum_log.shape)
w, h, l = shape_im
x = np.uint16(np.linspace(0, w, w))
y = np.uint16(np.linspace(0, h, h))
z = np.uint16(np.linspace(0, l, l))
x, y, z = np.meshgrid(x, y, z)
theta_list = np.arange(0, np.pi, np.pi/100)
phi_list = theta_list
xi_list = np.arange(0, 20, 1)
a = 1
energy_const = 1/np.sqrt(xi_list**2 + 2*a**2)
thetas, phis, xis = [int(i) for i in sys.argv[2].split(",")], [int(i) for i in sys.argv[3].split(",")], [int(i) for i in sys.argv[4].split(",")]
with open(d + "/grid.txt", "w") as f:
    for name, lst, idx in (("theta", theta_list, thetas), ("phi", phi_list, phis), ("xi", xi_list, xis)):
        f.write(",".join(repr(float(lst[i])) for i in idx) + "\n")
rows = []
with np.errstate(divide="ignore", invalid="ignore"):
    for i in thetas:
        for j in phis:
            for k in xis:
                if xi_list[k] == 0:
                    rows.append([np.nan]*4)
                    continue
                wavelet = skern3(x, y, z, a, theta_list[i], phi_list[j], xi_list[k])
                G = convolve(fib_sum_log.astype(np.float64), wavelet)
                images_wt = energy_const[k]*G
                rows.append([np.sum(np.abs(G)**2), np.sqrt(np.var(G)), np.max(G), np.max(images_wt)])
np.savetxt(d + "/author.csv", rows, delimiter=",")
`
	ti, pi, xi := "37,3", "81,50", "0,1,7,19"
	if out, err := exec.Command(py, "-c", script, dir, ti, pi, xi).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	grid := readLines(t, p("grid.txt"))
	out := p("stats.csv")
	_, se, code := run(t, "wavelet", "-q", "--volume", p("v.npy"), "--theta", grid[0], "--phi", grid[1], "--xi", grid[2],
		"--kernel", skern3, "--reach", "volume", "--indexing", "xy", "--stat", "wt_max=max(g)/sqrt(xi^2 + 2*a^2)", "--out", out)
	if code != 0 {
		t.Fatalf("wavelet: exit %d: %s", code, se)
	}
	if !strings.Contains(se, "tapeloop: warning: 4 combinations have no kernel") {
		t.Errorf("ξ = 0: stderr %q, want the no-kernel warning", se)
	}
	got, want := readCSV(t, out, true), readCSV(t, p("author.csv"), false)
	if len(got) != len(want) {
		t.Fatalf("%d rows, the author's program %d", len(got), len(want))
	}
	names := []string{"energy (trans_ener)", "std (var_image)", "max (max_image)", "wt_max"}
	for r := range want {
		for j, col := range []int{3, 4, 5, 7} {
			g, w := got[r][col], want[r][j]
			if math.IsNaN(w) {
				if !math.IsNaN(g) {
					t.Errorf("row %d (ξ = 0): %s = %v, want NaN", r, names[j], g)
				}
				continue
			}
			if d := math.Abs(g - w); !(d <= 2e-5*math.Abs(w)) {
				t.Errorf("row %d (θ = %v, φ = %v, ξ = %v): %s = %v, the author's %v (rel. %.2g)", r, got[r][0], got[r][1], got[r][2], names[j], g, w, d/math.Abs(w))
			}
		}
	}
}

// TestWaveletIndexing: --indexing says which of the volume's axes the
// kernel's x and y run along, as np.meshgrid's indexing, on a volume of
// three different sizes: a kernel on the volume's grid (--reach volume)
// and the built-in hat, against scipy.ndimage.convolve with the kernel
// made by np.meshgrid with that indexing.
func TestWaveletIndexing(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.ndimage")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
from scipy import ndimage
d = sys.argv[1]
rng = np.random.default_rng(7)
v = rng.standard_normal((15, 22, 11)).astype(np.float32)
np.save(d + "/v.npy", v)
th, ph, xi, a = 0.7, 1.9, 2.5, 1.3
c, s = np.cos, np.sin
def kern(x, y, z):
    u = x*c(ph)*c(th) - y*s(th) + z*s(ph)*c(th)
    w = x*c(ph)*s(th) + y*c(th) + z*s(ph)*s(th)
    t = -x*s(ph) + z*c(ph)
    q = (w/a)**2 + (u/(a*xi))**2 + (t/a)**2
    return (3 - q)*np.exp(-q/2) * (1 + 0.3*np.tanh(x - 0.5*y))
def stats(k, name):
    g = ndimage.convolve(v.astype(np.float64), k)
    np.savetxt(d + "/" + name, [[(g**2).sum(), g.std(), g.max()]], delimiter=",")
n0, n1, n2 = v.shape
ax = lambda m: np.arange(m) - m//2
# the volume's grid: meshgrid over its shape, each axis centred as ndimage does
stats(kern(*np.meshgrid(ax(n0), ax(n1), ax(n2), indexing="ij")), "grid-ij.csv")
stats(kern(*np.meshgrid(ax(n1), ax(n0), ax(n2))), "grid-xy.csv")          # x along axis 1
# the built-in hat over a box past its reach (q <= 36 ends within 6·a·ξ)
hat = lambda x, y, z: kern(x, y, z) / (1 + 0.3*np.tanh(x - 0.5*y))
b = np.arange(-21, 22)
stats(hat(*np.meshgrid(b, b, b)), "hat-xy.csv")
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	kernel := "(3 - q)*exp(-q/2)*(1 + 0.3*tanh(x - 0.5*y))"
	check := func(ref string, args ...string) {
		t.Helper()
		out := p(ref + "-got.csv")
		args = append([]string{"wavelet", "-q", "--volume", p("v.npy"), "--theta", "0.7", "--phi", "1.9", "--xi", "2.5", "-a", "1.3", "--out", out}, args...)
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", ref, code, se)
		}
		got, want := readCSV(t, out, true)[0][3:6], readCSV(t, p(ref), false)[0]
		for j := range want {
			if d := math.Abs(got[j] - want[j]); !(d <= 1e-4*math.Abs(want[j])) {
				t.Errorf("%s: statistic %d is %v, scipy.ndimage %v", ref, j, got[j], want[j])
			}
		}
	}
	check("grid-ij.csv", "--kernel", kernel, "--reach", "volume")
	check("grid-ij.csv", "--kernel", kernel, "--reach", "volume", "--indexing", "ij")
	check("grid-xy.csv", "--kernel", kernel, "--reach", "volume", "--indexing", "xy")
	check("hat-xy.csv", "--indexing", "xy")
}

// TestWaveletSaveResponse: --save-response writes the response G of
// chosen combinations, float32 in the volume's own shape, also with
// --indexing xy on a volume of three different sizes: against
// scipy.ndimage.convolve with the kernel made by np.meshgrid (indexing
// "xy"), and against the run's own CSV row. A shard writes the responses
// of its own combinations only.
func TestWaveletSaveResponse(t *testing.T) {
	py := testutil.Python(t, "numpy", "scipy.ndimage")
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	script := `
import numpy as np, sys
from scipy import ndimage
d = sys.argv[1]
rng = np.random.default_rng(29)
v = rng.standard_normal((14, 19, 10)).astype(np.float32)
np.save(d + "/v.npy", v)
th, ph, xi, a = np.pi/4, np.pi/3, 2.0, 1.0
c, s = np.cos, np.sin
b = np.arange(-13, 14)
x, y, z = np.meshgrid(b, b, b)  # x along the second axis
u = x*c(ph)*c(th) - y*s(th) + z*s(ph)*c(th)
w = x*c(ph)*s(th) + y*c(th) + z*s(ph)*s(th)
t = -x*s(ph) + z*c(ph)
q = (w/a)**2 + (u/(a*xi))**2 + (t/a)**2
np.save(d + "/want.npy", ndimage.convolve(v.astype(np.float64), (3 - q)*np.exp(-q/2)))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	args := []string{"wavelet", "-q", "--volume", p("v.npy"), "--theta", "0,pi/4", "--phi", "pi/3", "--xi", "1,2", "--indexing", "xy"}
	if _, se, code := run(t, append(args, "--out", p("s.csv"), "--save-response", "pi/4,pi/3,2:"+p("g.npy"))...); code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	h, g, err := npy.ReadAll64(p("g.npy"))
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := npy.ReadAll64(p("want.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(h.Shape) != "[14 19 10]" || h.Dtype != npy.Float32 {
		t.Fatalf("response of shape %v, %v; want the volume's [14 19 10], float32", h.Shape, h.Dtype)
	}
	var peak, worst, energy float64
	for i := range want {
		peak = max(peak, math.Abs(want[i]))
		worst = max(worst, math.Abs(g[i]-want[i]))
		energy += g[i] * g[i]
	}
	if !(worst <= 1e-4*peak) {
		t.Errorf("response differs from scipy.ndimage.convolve by %.3g (its peak %.3g)", worst, peak)
	}
	row := readCSV(t, p("s.csv"), true)[3]
	if d := math.Abs(energy - row[3]); !(d <= 1e-5*row[3]) {
		t.Errorf("Σ G² of the saved response %v, the CSV's energy %v", energy, row[3])
	}
	// Two shards of four combinations: the response of the fourth is the
	// second shard's to write.
	for i := range 2 {
		out := p(fmt.Sprintf("shard%d.npz", i))
		if _, se, code := run(t, append(args, "--shard", fmt.Sprintf("%d/2", i), "--out", out, "--save-response", "pi/4,pi/3,2:"+p(fmt.Sprintf("g%d.npy", i)))...); code != 0 {
			t.Fatalf("shard %d: exit %d: %s", i, code, se)
		}
	}
	if _, err := os.Stat(p("g0.npy")); err == nil {
		t.Error("shard 0 wrote the response of a combination of shard 1")
	}
	if _, g1, err := npy.ReadAll64(p("g1.npy")); err != nil || !slices.Equal(g1, g) {
		t.Error("shard 1's response differs from the whole run's")
	}
}

// TestWaveletReportCosts: a sweep of mixed kernel sizes reports its drift
// per cost class (batches of equal transform cost), the classes' batches
// adding up to the run's, and its batches run in order of cost, the small
// transforms first.
func TestWaveletReportCosts(t *testing.T) {
	rep := filepath.Join(t.TempDir(), "report.json")
	if _, se, code := run(t, "wavelet", "-q", "--size", "30x26x22", "--theta", "0:pi:3", "--phi", "0:pi:2", "--xi", "1,3,6",
		"--batch", "2", "--report", rep); code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	var r struct {
		Batches int `json:"batches"`
		Summary struct {
			Drift       float64 `json:"drift"`
			DriftByCost []struct {
				Cost    float64 `json:"cost"`
				Batches int     `json:"batches"`
			} `json:"drift_by_cost"`
		} `json:"summary"`
		Iterations []struct {
			Cost float64 `json:"cost"`
		} `json:"iterations"`
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range r.Summary.DriftByCost {
		n += c.Batches
	}
	if len(r.Summary.DriftByCost) < 2 || n != r.Batches || !(r.Summary.Drift > 0) {
		t.Errorf("drift %v by cost %+v over %d batches: want two classes or more, adding up to the batches", r.Summary.Drift, r.Summary.DriftByCost, r.Batches)
	}
	if len(r.Iterations) != r.Batches || r.Iterations[0].Cost <= 0 || r.Iterations[len(r.Iterations)-1].Cost <= r.Iterations[0].Cost {
		t.Errorf("batch costs %+v: want each positive, the last above the first", r.Iterations)
	}
}
