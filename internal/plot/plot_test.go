package plot

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
)

var update = flag.Bool("update", false, "rewrite the reference figures in testdata")

// refSize is the size of the reference figures.
const refW, refH = 300, 200

// maxMeanDiff is how far, on average over the pixels and channels (0-255),
// a figure may differ from its reference: text rasterised by another
// version of the font code moves a few edge pixels, a wrong figure moves
// far more.
const maxMeanDiff = 3.0

// input writes one figure kind's input into dir from rng and returns its
// path and the texts its SVG must hold.
type input func(t *testing.T, dir string, rng *rand.Rand) (path string, texts []string)

var kinds = []struct {
	name  string
	write input
	cfg   Config
}{
	{"report", writeReport, Config{}},
	{"wavelet", writeWavelet, Config{}},
	{"wavelet-stat", writeWavelet, Config{Column: "l1"}},
	{"matrix", writeMatrix, Config{}},
	{"topk", writeTopK, Config{}},
	{"drr", writeStack, Config{}},
	{"trace", writeTrace, Config{}},
	{"times", writeTimes, Config{}},
	{"times-log", writeTimesSpread, Config{}},
	{"times-runs", writeTimesRuns, Config{}},
}

// TestFigures draws every kind from fresh random data, of odd sizes, as
// PNG and SVG, and checks the PNG's size and the SVG's titles and labels.
func TestFigures(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			in, texts := k.write(t, dir, rand.New(rand.NewPCG(seed, 1)))
			if k.name == "wavelet-stat" {
				texts = append(texts, "l1")
			}
			fig, err := read(in, k.cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg := k.cfg
			cfg.Out = filepath.Join(dir, "fig.png")
			if err := Draw(in, cfg); err != nil {
				t.Fatal(err)
			}
			img := decodePNG(t, cfg.Out)
			if b := img.Bounds(); b.Dx() != int(math.Round(float64(fig.w))) || b.Dy() != int(math.Round(float64(fig.h))) {
				t.Errorf("PNG is %dx%d, want %gx%g", b.Dx(), b.Dy(), fig.w, fig.h)
			}
			cfg.Out = filepath.Join(dir, "fig.svg")
			if err := Draw(in, cfg); err != nil {
				t.Fatal(err)
			}
			svg, err := os.ReadFile(cfg.Out)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range texts {
				if !bytes.Contains(svg, []byte(">"+s+"<")) {
					t.Errorf("the SVG has no text %q", s)
				}
			}
		})
	}
}

// TestReferences draws every kind from fixed inputs at 300×200 and
// compares the PNG with the one in testdata (go test -update rewrites
// them).
func TestReferences(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			in, _ := k.write(t, dir, rand.New(rand.NewPCG(7, 7)))
			cfg := k.cfg
			cfg.Width, cfg.Height = refW, refH
			cfg.Out = filepath.Join(dir, "fig.png")
			if err := Draw(in, cfg); err != nil {
				t.Fatal(err)
			}
			ref := filepath.Join("testdata", k.name+".png")
			if *update {
				data, err := os.ReadFile(cfg.Out)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(ref, data, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			got, want := decodePNG(t, cfg.Out), decodePNG(t, ref)
			if got.Bounds() != want.Bounds() {
				t.Fatalf("the figure is %v, its reference %v", got.Bounds(), want.Bounds())
			}
			if d := meanDiff(got, want); d > maxMeanDiff {
				t.Errorf("the figure differs from %s by %.2f on average (at most %g)", ref, d, maxMeanDiff)
			} else {
				t.Logf("mean difference %.3f", d)
			}
		})
	}
}

// TestBadInputs checks that every input that cannot be drawn is an error
// that says why, and that no figure is written.
func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	wavelet, _ := writeWavelet(t, dir, rng)
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, in string
		cfg      Config
		want     string
	}{
		{"unknown column", wavelet, Config{Column: "nope"}, `no column "nope" (--column takes one of energy, std, max, wavelet_energy, l1)`},
		{"empty CSV", write("empty.csv", ""), Config{}, "the file is empty"},
		{"header only", write("head.csv", "theta,phi,xi,energy\n"), Config{}, "a header and no rows"},
		{"other CSV", write("other.csv", "a,b\n1,2\n"), Config{}, "not a wavelet CSV"},
		{"not a number", write("nan.csv", "theta,phi,xi,energy\n0,0,1,x\n"), Config{}, `"x" is not a number`},
		{"column of a trace", write("t.csv", "step,level,loss,rx,ry,rz,tx,ty,tz,seconds\n0,0,1,0,0,0,0,0,0,0\n"), Config{Column: "loss"}, "--column picks a wavelet CSV's column"},
		{"JSON not a report", write("x.json", `{"a": 1}`), Config{}, "not a tapeloop report"},
		{"JSON broken", write("y.json", `{"workload": `), Config{}, "not a tapeloop report"},
		{"report without batches", write("z.json", `{"workload": "interp", "iterations": []}`), Config{}, "no batches"},
		{"unknown input extension", write("x.txt", "1"), Config{}, `unknown input extension ".txt"`},
		{"missing file", filepath.Join(dir, "missing.csv"), Config{}, "no such file or directory"},
		{"1-D npy", writeNpy(t, dir, "v.npy", []int{4}, []float64{1, 2, 3, 4}), Config{}, "an array of shape (4,)"},
		{"npz without values", writeNPZ(t, dir, "o.npz", "other", []int{1, 1}, []float64{1}), Config{}, "not a top-k .npz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, ext := range []string{".png", ".svg"} {
				c.cfg.Out = filepath.Join(dir, "out"+ext)
				err := Draw(c.in, c.cfg)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want one saying %q", err, c.want)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("the error spans lines: %q", err)
				}
				if _, err := os.Stat(c.cfg.Out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was written", c.cfg.Out)
				}
			}
		})
	}
	out := filepath.Join(dir, "fig.pdf")
	if err := Draw(wavelet, Config{Out: out}); err == nil || !strings.Contains(err.Error(), `unknown output extension ".pdf"`) {
		t.Errorf("output .pdf: error %v", err)
	}
	if err := Draw(wavelet, Config{}); err == nil {
		t.Errorf("no output: no error")
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was written", out)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".*")); len(ents) > 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// meanDiff is the mean absolute difference of a and b's RGB channels,
// on 0-255.
func meanDiff(a, b image.Image) float64 {
	var sum float64
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			ar, ag, ab, _ := a.At(x, y).RGBA()
			br, bg, bb, _ := b.At(x, y).RGBA()
			sum += math.Abs(float64(ar)-float64(br)) + math.Abs(float64(ag)-float64(bg)) + math.Abs(float64(ab)-float64(bb))
		}
	}
	return sum / 257 / 3 / float64(r.Dx()*r.Dy())
}

func writeText(t *testing.T, path, s string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeReport(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	n := 7 + rng.IntN(40)
	its := make([]map[string]any, n)
	for i := range its {
		its[i] = map[string]any{"seconds": 0.01 + 0.002*rng.Float64(), "heap_bytes": 1 << 20, "rss_bytes": (30 << 20) + rng.IntN(4<<20)}
	}
	r := map[string]any{"workload": "interp", "mem_limit_bytes": 40 << 20, "summary": map[string]any{"drift": 1.0123}, "iterations": its}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return writeText(t, filepath.Join(dir, "report.json"), string(data)),
		[]string{"interp: time per batch", "resident memory", "batch", "MiB", "ms", "drift 1.01 (median of last decile / first)", "--mem-limit 40 MiB"}
}

func writeWavelet(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	nt, np, nx := 3+rng.IntN(5), 2+rng.IntN(5), 1+rng.IntN(4)
	var b strings.Builder
	b.WriteString("theta,phi,xi,energy,std,max,wavelet_energy,l1\n")
	var texts []string
	for i := range nt {
		for j := range np {
			for k := range nx {
				th, ph, xi := math.Pi*float64(i)/float64(nt), math.Pi*float64(j)/float64(np), 1+0.5*float64(k)
				fmt.Fprintf(&b, "%v,%v,%v,%v,%v,%v,%v,%v\n", th, ph, xi, 1e5*(1+rng.Float64()), rng.Float64(), rng.Float64(), 20.0, rng.Float64()*1e4)
			}
		}
	}
	for k := range nx {
		texts = append(texts, "ξ = "+num(1+0.5*float64(k)))
	}
	texts = append(texts, "θ (rad)", "φ (rad)")
	return writeText(t, filepath.Join(dir, "sweep.csv"), b.String()), texts
}

func writeNpy(t *testing.T, dir, name string, shape []int, v []float64) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := npy.NewWriter(&buf, npy.Float32, shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write64(v); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return writeText(t, filepath.Join(dir, name), buf.String())
}

func writeNPZ(t *testing.T, dir, name, member string, shape []int, v []float64) string {
	t.Helper()
	var buf bytes.Buffer
	z := npy.NewNPZWriter(&buf)
	w, err := z.Create(member, npy.Float32, shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write64(v); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return writeText(t, filepath.Join(dir, name), buf.String())
}

func writeMatrix(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	n := 17 + rng.IntN(30)
	v := make([]float64, n*n)
	for i := range n {
		for j := range n {
			v[i*n+j] = math.Exp(-math.Abs(float64(i-j))/5) + 0.1*rng.Float64()
		}
	}
	return writeNpy(t, dir, "A.npy", []int{n, n}, v), []string{fmt.Sprintf("affinity matrix %d×%d", n, n), "column j", "row i"}
}

func writeTopK(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	n, k := 31+rng.IntN(50), 3+rng.IntN(4)
	v := make([]float64, n*k)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return writeNPZ(t, dir, "top.npz", "values", []int{n, k}, v), []string{fmt.Sprintf("top-%d neighbour values (%d)", k, n*k), "affinity", "count"}
}

func writeStack(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	p, r, c := 3+rng.IntN(6), 9+rng.IntN(8), 11+rng.IntN(10)
	v := make([]float64, p*r*c)
	for i := range p {
		for y := range r {
			for x := range c {
				v[(i*r+y)*c+x] = math.Max(0, 1-math.Hypot(float64(x-c/2-i), float64(y-r/2))/float64(r)) + 0.05*rng.Float64()
			}
		}
	}
	texts := []string{fmt.Sprintf("pose %d", p-1)}
	for i := range p {
		texts = append(texts, fmt.Sprintf("pose %d", i))
	}
	return writeNpy(t, dir, "drr.npy", []int{p, r, c}, v), texts
}

func writeTrace(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	n := 9 + rng.IntN(30)
	var b strings.Builder
	b.WriteString("step,level,loss,rx,ry,rz,tx,ty,tz,seconds\n")
	p := make([]float64, 6)
	for i := range n {
		for j := range p {
			p[j] += 0.01 * rng.NormFloat64()
		}
		fmt.Fprintf(&b, "%d,%d,%v,%v,%v,%v,%v,%v,%v,%v\n", i, 3*i/n, math.Exp(-float64(i)/10), p[0], p[1], p[2], p[3], p[4], p[5], 0.001*float64(i))
	}
	return writeText(t, filepath.Join(dir, "trace.csv"), b.String()), []string{"loss", "rotation vector", "translation", "step", "rad", "mm", "rx", "tz"}
}

func writeTimes(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	n := 11 + rng.IntN(30)
	var b strings.Builder
	b.WriteString("series,iteration,seconds\n")
	for _, s := range []string{"planned", "naive"} {
		for i := range n {
			fmt.Fprintf(&b, "%s,%d,%v\n", s, i, 0.002+0.001*rng.Float64())
		}
	}
	return writeText(t, filepath.Join(dir, "times.csv"), b.String()), []string{"time per iteration", "iteration", "ms", "planned", "naive"}
}

// writeTimesRuns writes a table by runs, as make compare PLOT=DIR does:
// the x axis is named run.
func writeTimesRuns(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	var b strings.Builder
	b.WriteString("series,run,seconds\n")
	for _, s := range []string{"tapeloop", "numpy"} {
		for i := range 3 + rng.IntN(3) {
			fmt.Fprintf(&b, "%s,%d,%v\n", s, i+1, 0.01+0.01*rng.Float64())
		}
	}
	return writeText(t, filepath.Join(dir, "runs.csv"), b.String()), []string{"time per run", "run", "ms", "tapeloop", "numpy"}
}

// writeTimesSpread writes two pairs of series a thousand times apart: the
// figure's axis is logarithmic, and a pair shares a colour.
func writeTimesSpread(t *testing.T, dir string, rng *rand.Rand) (string, []string) {
	n := 11 + rng.IntN(30)
	var b strings.Builder
	b.WriteString("series,iteration,seconds\n")
	for _, s := range []struct {
		name  string
		scale float64
	}{{"interp naive", 0.1}, {"interp planned", 1e-4}, {"drr naive", 0.05}, {"drr planned", 5e-4}} {
		for i := range n {
			fmt.Fprintf(&b, "%s,%d,%v\n", s.name, i, s.scale*(1+rng.Float64()))
		}
	}
	return writeText(t, filepath.Join(dir, "times.csv"), b.String()), []string{"ms (log scale)", "interp naive", "drr planned"}
}
