package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/internal/npy"
)

func TestInterpFlagsCoverConfig(t *testing.T) {
	checkFlagsCover(t, interpCommand, interp.Config{}, func(c *cli.Context) (any, error) { return interpSpec(c) }, nil)
}

// TestInterpReduceNoneSummary: with --reduce none the printed sum is that
// of every value written, and the line says so.
func TestInterpReduceNoneSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "v.npy")
	stdout, stderr, code := run(t, "interp", "-q", "--reduce", "none", "--points", "37", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, v, err := npy.ReadAll64(out)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	var got float64
	if _, err := fmt.Sscanf(stdout[strings.LastIndex(stdout, ": ")+2:], "%g", &got); err != nil ||
		!strings.HasPrefix(stdout, "interp: sum of all M values over 37 queries") || math.Abs(got-sum) > 1e-6*math.Abs(sum) {
		t.Errorf("stdout %q: want the sum of all M values, %v", stdout, sum)
	}
}

// TestInterpFloat32FarFromZero: on a grid far from zero (a Unix time; 10³
// with dx = 10⁻⁵), float32 runs agree with float64 runs to float32's
// precision, for float64 queries from a file and for the built-in ones;
// float32 queries from a file, which hold such points only to a few grid
// steps, still run (on the points as stored) and are warned about, in one
// line.
func TestInterpFloat32FarFromZero(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	const m, g, n = 5, 37, 3001
	f := make([]float64, m*g)
	for i := range f {
		f[i] = math.Sin(float64(i)*0.7) + 0.2
	}
	writeNpy(t, p("f.npy"), []int{m, g}, f)
	compare := func(t *testing.T, args ...string) {
		t.Helper()
		var res [2][]float64
		for i, dt := range []string{"float32", "float64"} {
			out := p("out_" + dt + ".npy")
			_, stderr, code := run(t, append([]string{"interp", "-q", "--reduce", "sum", "--dtype", dt, "--out", out}, args...)...)
			if code != 0 || stderr != "" {
				t.Fatalf("--dtype %s: exit %d: %s", dt, code, stderr)
			}
			var err error
			if _, res[i], err = npy.ReadAll64(out); err != nil {
				t.Fatal(err)
			}
		}
		scale := 0.0
		for _, v := range res[1] {
			scale = max(scale, math.Abs(v))
		}
		for i := range res[1] {
			if d := math.Abs(res[0][i] - res[1][i]); !(d <= 2e-5*scale) {
				t.Fatalf("query %d: float32 %.9g, float64 %.9g", i, res[0][i], res[1][i])
			}
		}
	}
	for _, c := range []struct{ a, dx float64 }{{1.7e9, 1}, {1e3, 1e-5}} {
		a, dx := fmt.Sprint(c.a), fmt.Sprint(c.dx)
		t.Run("a="+a, func(t *testing.T) {
			x := make([]float64, n)
			x32 := make([]float32, n)
			for i := range x {
				x[i] = c.a + (float64(i*7919%n)/n*(g-0.5)-1.5)*c.dx // up to the last node
				x32[i] = float32(x[i])
			}
			writeNpy(t, p("x.npy"), []int{n}, x)
			compare(t, "-f", p("f.npy"), "-x", p("x.npy"), "-a", a, "--dx", dx)
			compare(t, "--interpolants", "3", "--grid", "41", "--points", "2001", "-a", a, "--dx", dx)

			w, err := os.Create(p("x32.npy"))
			if err != nil {
				t.Fatal(err)
			}
			nw, err := npy.NewWriter(w, npy.Float32, []int{n})
			if err == nil {
				err = nw.Write32(x32)
			}
			if err == nil {
				err = nw.Flush()
			}
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			_, stderr, code := run(t, "interp", "-q", "--reduce", "sum", "-f", p("f.npy"), "-x", p("x32.npy"), "-a", a, "--dx", dx)
			if code != 0 || !strings.HasPrefix(stderr, "tapeloop: warning: --x "+p("x32.npy")+": the queries are float32") ||
				strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "save them as float64") {
				t.Errorf("float32 queries: exit %d, stderr %q: want 0 and one warning line", code, stderr)
			}
		})
	}
	// a grid from 0: float32 queries as precise as the grid needs, no warning
	x32 := p("x32_0.npy")
	w, _ := os.Create(x32)
	nw, _ := npy.NewWriter(w, npy.Float32, []int{3})
	nw.Write32([]float32{0.1, 0.5, 0.9})
	nw.Flush()
	w.Close()
	if _, stderr, code := run(t, "interp", "-q", "-f", p("f.npy"), "-x", x32); code != 0 || stderr != "" {
		t.Errorf("float32 queries on [0, 1]: exit %d, stderr %q", code, stderr)
	}
}
