package ops

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// scipyFilterScript applies, to the (P, R, C) float32 images in a raw
// file, one scipy.ndimage filter per job, in float64, and writes each
// result as raw float64: the references for Filter2D.
const scipyFilterScript = `
import json, sys
import numpy as np
from scipy import ndimage as nd
a = json.loads(sys.argv[1])
x = np.fromfile(a["in"], dtype="<f4").reshape(a["shape"]).astype(np.float64)
for j in a["jobs"]:
    m = j["mode"]
    if j["kind"] == "gauss":
        y = nd.gaussian_filter(x, sigma=(0, j["sigma"][0], j["sigma"][1]), mode=m, truncate=j["truncate"])
    elif j["kind"] == "box":
        y = nd.uniform_filter(x, size=(1, j["size"], j["size"]), mode=m)
    elif j["kind"] == "correlate":
        y = nd.correlate1d(x, np.array(j["row"]), axis=2, mode=m)
        y = nd.correlate1d(y, np.array(j["col"]), axis=1, mode=m)
    y.astype("<f8").tofile(j["out"])
`

// scipyJob is one filter for scipyFilterScript.
type scipyJob struct {
	Kind     string     `json:"kind"`
	Mode     string     `json:"mode"`
	Sigma    [2]float64 `json:"sigma,omitzero"` // rows, cols: pixels
	Truncate float64    `json:"truncate,omitzero"`
	Size     int        `json:"size,omitzero"`
	Row      []float64  `json:"row,omitempty"` // correlate: taps along the rows, then down the columns
	Col      []float64  `json:"col,omitempty"`
	Out      string     `json:"out"`
}

// needSciPy returns /usr/bin/python3, skipping the test where it lacks
// numpy or scipy.
func needSciPy(t testing.TB) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import numpy, scipy.ndimage").CombinedOutput(); err != nil {
		t.Skipf("python3 with numpy and scipy not available (apt-get install python3-scipy): %v %s", err, strings.TrimSpace(string(out)))
	}
	return py
}

// scipyFilter runs jobs over imgs (p, r, c) and returns each result.
func scipyFilter(t testing.TB, imgs []float32, p, r, c int, jobs []scipyJob) [][]float64 {
	t.Helper()
	py := needSciPy(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.f32")
	b := make([]byte, 0, 4*len(imgs))
	for _, v := range imgs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	if err := os.WriteFile(in, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		jobs[i].Out = filepath.Join(dir, "out"+strconv.Itoa(i)+".f64")
	}
	arg, _ := json.Marshal(map[string]any{"in": in, "shape": []int{p, r, c}, "jobs": jobs})
	if out, err := exec.Command(py, "-c", scipyFilterScript, string(arg)).CombinedOutput(); err != nil {
		t.Fatalf("scipy: %v\n%s", err, out)
	}
	res := make([][]float64, len(jobs))
	for i, j := range jobs {
		raw, err := os.ReadFile(j.Out)
		if err != nil || len(raw) != 8*len(imgs) {
			t.Fatalf("scipy's result %d: %d bytes, %v", i, len(raw), err)
		}
		res[i] = make([]float64, len(imgs))
		for k := range res[i] {
			res[i][k] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*k:]))
		}
	}
	return res
}

func modeName(m FilterMode) string {
	if m == FilterNearest {
		return "nearest"
	}
	return "reflect"
}

func widen32(w []float32) []float64 { return opstest.Widen(w) }

// filterSciPyCase is a kernel built from the taps functions, and the
// scipy filter it must match.
type filterSciPyCase struct {
	name string
	k    *SepKernel
	job  scipyJob
}

func mustKernel(t testing.TB, name string, row, col []float32, mode FilterMode) *SepKernel {
	t.Helper()
	k, err := NewSepKernel(name, row, col, mode)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustTaps(t testing.TB) func([]float32, error) []float32 {
	return func(w []float32, err error) []float32 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
}

// filterSciPyCases: Gaussians of different σ along each axis (a
// detector's anisotropic pixels), both boundaries, one far wider than
// the image (the reflection repeats), another truncated elsewhere; boxes
// of odd and even size; a central difference along x per mm and a
// Sobel-like one along y; all against scipy.ndimage.
func filterSciPyCases(t testing.TB) []filterSciPyCase {
	tp := mustTaps(t)
	var cases []filterSciPyCase
	gauss := func(sr, sc, trunc float64, mode FilterMode) {
		name := "gauss/" + strconv.FormatFloat(sr, 'g', -1, 64) + "x" + strconv.FormatFloat(sc, 'g', -1, 64) + "/" + modeName(mode)
		row, col := tp(GaussianTaps(sc, trunc)), tp(GaussianTaps(sr, trunc))
		cases = append(cases, filterSciPyCase{name, mustKernel(t, name, row, col, mode),
			scipyJob{Kind: "gauss", Mode: modeName(mode), Sigma: [2]float64{sr, sc}, Truncate: trunc}})
	}
	gauss(1.3, 2.1, 4, FilterReflect)
	gauss(0.6, 0.6, 4, FilterNearest)
	gauss(0.3, 0.45, 4, FilterReflect) // radius 1 and 2
	gauss(30, 9, 4, FilterReflect)     // 241 taps down 37 rows
	gauss(2.5, 1.7, 2.5, FilterNearest)
	for _, s := range []struct {
		n    int
		mode FilterMode
	}{{3, FilterReflect}, {4, FilterReflect}, {5, FilterNearest}, {1, FilterReflect}} {
		name := "box/" + strconv.Itoa(s.n) + "/" + modeName(s.mode)
		w := tp(BoxTaps(s.n))
		cases = append(cases, filterSciPyCase{name, mustKernel(t, name, w, w, s.mode), scipyJob{Kind: "box", Mode: modeName(s.mode), Size: s.n}})
	}
	one := []float32{1}
	dx := tp(DerivativeTaps(0.7))
	cases = append(cases, filterSciPyCase{"deriv/x", mustKernel(t, "deriv/x", dx, one, FilterReflect),
		scipyJob{Kind: "correlate", Mode: "reflect", Row: widen32(dx), Col: []float64{1}}})
	dy := tp(DerivativeTaps(1.3))
	cases = append(cases, filterSciPyCase{"sobel/y", mustKernel(t, "sobel/y", SmoothTaps(), dy, FilterNearest),
		scipyJob{Kind: "correlate", Mode: "nearest", Row: widen32(SmoothTaps()), Col: widen32(dy)}})
	return cases
}

// TestFilter2DAgainstSciPy: three random 37×53 images through each case's
// op, into its buffer and in place, within 2e-6 of scipy's float64
// result relative to the image's largest value.
func TestFilter2DAgainstSciPy(t *testing.T) {
	const p, r, c = 3, 37, 53
	imgs := opstest.Normals32(rand.New(rand.NewPCG(7, 8)), p*r*c)
	cases := filterSciPyCases(t)
	jobs := make([]scipyJob, len(cases))
	for i, fc := range cases {
		jobs[i] = fc.job
	}
	want := scipyFilter(t, imgs, p, r, c, jobs)
	for i, fc := range cases {
		t.Run(fc.name, func(t *testing.T) {
			op := NewFilter2D(fc.k, p, r, c)
			v, err := op.Do(tensor.New(tensor.WithShape(p, r, c), tensor.WithBacking(imgs)))
			if err != nil {
				t.Fatal(err)
			}
			checkFilter(t, "op", v.(*tensor.Dense).Data().([]float32), want[i], r, c)
			inPlace := append([]float32(nil), imgs...)
			op.Apply(inPlace, inPlace, p)
			checkFilter(t, "in place", inPlace, want[i], r, c)
		})
	}
}

// checkFilter: every pixel within 2e-6 of the largest |want|.
func checkFilter(t *testing.T, what string, got []float32, want []float64, r, c int) {
	t.Helper()
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	for i, w := range want {
		if d := math.Abs(float64(got[i]) - w); !(d <= 2e-6*scale) {
			t.Fatalf("%s: image %d pixel (%d, %d): %v, scipy %v (off by %.3g of %.3g)", what, i/(r*c), i/c%r, i%c, got[i], w, d, scale)
		}
	}
}

// TestGaussianTapsTinySigma: a σ so small that one tap remains is that
// tap, 1 (the filter leaves the image as it is), down to σ whose square is
// 0 in float64; just above the half-tap radius there are three taps, the
// outer ones exp(−1/2σ²) over their sum, as written out here.
func TestGaussianTapsTinySigma(t *testing.T) {
	for _, sigma := range []float64{1e-300, 1e-160, 1e-10, 0.1, 0.124} {
		w, err := GaussianTaps(sigma, 4)
		if err != nil || len(w) != 1 || w[0] != 1 {
			t.Errorf("σ %g: taps %v (%v), want [1]", sigma, w, err)
		}
	}
	sigma := 0.13 // r = ⌊4·0.13 + ½⌋ = 1
	w, err := GaussianTaps(sigma, 4)
	e := math.Exp(-0.5 / (sigma * sigma))
	want := []float32{float32(e / (1 + 2*e)), float32(1 / (1 + 2*e)), float32(e / (1 + 2*e))}
	if err != nil || fmt.Sprint(w) != fmt.Sprint(want) {
		t.Errorf("σ %g: taps %v (%v), want %v", sigma, w, err, want)
	}
}

// TestFilterTapsBadInput: taps that cannot be made, or a kernel that
// cannot be, are errors wrapping ErrFilter.
func TestFilterTapsBadInput(t *testing.T) {
	errs := []error{}
	_, err := GaussianTaps(0, 4)
	errs = append(errs, err)
	_, err = GaussianTaps(math.NaN(), 4)
	errs = append(errs, err)
	_, err = GaussianTaps(1, math.Inf(1))
	errs = append(errs, err)
	_, err = GaussianTaps(1e5, 4)
	errs = append(errs, err)
	_, err = BoxTaps(0)
	errs = append(errs, err)
	_, err = BoxTaps(MaxFilterTaps + 1)
	errs = append(errs, err)
	_, err = DerivativeTaps(0)
	errs = append(errs, err)
	_, err = NewSepKernel("k", nil, []float32{1}, FilterReflect)
	errs = append(errs, err)
	_, err = NewSepKernel("k", []float32{1, float32(math.NaN())}, []float32{1}, FilterReflect)
	errs = append(errs, err)
	_, err = NewSepKernel("k", []float32{1}, []float32{1}, FilterMode(7))
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, ErrFilter) {
			t.Errorf("case %d: %v, want an ErrFilter", i, err)
		} else if msg := err.Error(); strings.Contains(msg, "\n") || msg != strings.ToLower(msg[:1])+msg[1:] {
			t.Errorf("case %d: %q: want one lowercase line", i, msg)
		}
	}
}

// TestFilter2DReplayDoesNotAllocateBuffers: the output and the scratch
// are the same memory run after run.
func TestFilter2DReplayDoesNotAllocateBuffers(t *testing.T) {
	w, _ := GaussianTaps(1.5, 4)
	op := NewFilter2D(mustKernel(t, "g", w, w, FilterReflect), 2, 64, 64)
	in := tensor.New(tensor.WithShape(2, 64, 64), tensor.WithBacking(make([]float32, 2*64*64)))
	v, err := op.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	tmp := &op.tmp[0]
	// The two passes' goroutines and closures only: no image-sized buffer.
	allocs := testing.AllocsPerRun(20, func() {
		if v2, err := op.Do(in); err != nil || v2 != v {
			t.Fatal("another buffer, or", err)
		}
	})
	if &op.tmp[0] != tmp {
		t.Error("the scratch batch was made again")
	}
	if allocs > 16 {
		t.Errorf("%v allocations per run", allocs)
	}
}

// benchmarkFilter2D filters one rows×cols image with a Gaussian of σ
// pixels, and, where scipy is installed, reports scipy's gaussian_filter
// on the same image (float32 in and out, best of 20) as scipy-ns/op.
func benchmarkFilter2D(b *testing.B, rows, cols int, sigma float64) {
	w, err := GaussianTaps(sigma, 4)
	if err != nil {
		b.Fatal(err)
	}
	op := NewFilter2D(mustKernel(b, "g", w, w, FilterReflect), 1, rows, cols)
	img := opstest.Normals32(rand.New(rand.NewPCG(1, 1)), rows*cols)
	in := tensor.New(tensor.WithShape(1, rows, cols), tensor.WithBacking(img))
	if _, err := op.Do(in); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(4 * rows * cols))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := op.Do(in); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := exec.Command("/usr/bin/python3", "-c", "import scipy.ndimage").CombinedOutput(); err != nil {
		return
	}
	script := `import sys, timeit
import numpy as np
from scipy import ndimage as nd
r, c, s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
x = np.random.default_rng(1).standard_normal((r, c)).astype(np.float32)
out = np.empty_like(x)
print(min(timeit.repeat(lambda: nd.gaussian_filter(x, s, mode="reflect", truncate=4.0, output=out), number=1, repeat=20)) * 1e9)`
	out, err := exec.Command("/usr/bin/python3", "-c", script, strconv.Itoa(rows), strconv.Itoa(cols), strconv.FormatFloat(sigma, 'g', -1, 64)).Output()
	if err != nil {
		b.Logf("scipy: %v", err)
		return
	}
	if ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil {
		b.ReportMetric(ns, "scipy-ns/op")
	}
}

func BenchmarkFilter2DGauss512Sigma2(b *testing.B) { benchmarkFilter2D(b, 512, 512, 2) }
func BenchmarkFilter2DGauss512Sigma8(b *testing.B) { benchmarkFilter2D(b, 512, 512, 8) }
