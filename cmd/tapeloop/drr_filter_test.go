package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// scipyDRRFilter filters the images of an .npy file as tapeloop's
// --filter stages should, with scipy.ndimage in float64, and prints the
// result as JSON: the stages are given as scipy calls.
const scipyDRRFilter = `
import json, sys
import numpy as np
from scipy import ndimage as nd
a = json.loads(sys.argv[1])
x = np.load(a["in"]).astype(np.float64)
for s in a["stages"]:
    if s[0] == "gauss":
        x = nd.gaussian_filter(x, sigma=(0, s[1], s[2]), mode=s[3], truncate=4.0)
    elif s[0] == "box":
        x = nd.uniform_filter(x, size=(1, s[1], s[1]), mode=s[2])
    elif s[0] == "correlate":
        x = nd.correlate1d(x, np.array(s[2]), axis=s[1], mode=s[3])
np.save(a["out"], x)
`

// anisotropicGeometry renders an orbit's geometry.json into dir with
// pixels of du×dv mm (du along a row, dv down a column) instead.
func anisotropicGeometry(t *testing.T, dir string, du, dv float64) string {
	t.Helper()
	if _, se, code := run(t, "drr", "--quiet", "--size", "24", "--orbit", "3", "--detector", "37x53", "--pixel", "2", "--out", filepath.Join(dir, "orbit")); code != 0 {
		t.Fatalf("orbit: exit %d: %s", code, se)
	}
	b, err := os.ReadFile(filepath.Join(dir, "orbit", "geometry.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc["poses"].([]any) {
		pose := p.(map[string]any)
		pose["pixel"] = []float64{du, dv}
		delete(pose, "matrix")
	}
	b, _ = json.Marshal(doc)
	path := filepath.Join(dir, "aniso.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDRRFilterMatchesSciPy: a DRR with --filter is the same DRR without
// it, filtered by scipy.ndimage: a Gaussian of σ in mm on a detector of
// 1.5×2.5 mm pixels (σ 2 pixels along a row, 1.2 down a column) after
// --post, and without --post a chain, a box of even size with nearest
// edges then a derivative down the columns per mm.
func TestDRRFilterMatchesSciPy(t *testing.T) {
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import numpy, scipy.ndimage").CombinedOutput(); err != nil {
		t.Skipf("python3 with numpy and scipy not available: %v %s", err, out)
	}
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	geo := anisotropicGeometry(t, dir, 1.5, 2.5)
	base := []string{"drr", "--quiet", "--size", "24", "--geometry", geo}
	for _, c := range []struct {
		name    string
		flags   []string // the images' own, without the filters
		filters []string
		stages  []any // scipy's, in order
	}{
		{"gauss after post", []string{"--post", "exp(-p)"}, []string{"gauss:sigma_mm=3"}, []any{[]any{"gauss", 1.2, 2.0, "reflect"}}},
		{"box then deriv", nil, []string{"box:4,mode=nearest", "deriv:y"},
			[]any{[]any{"box", 4, "nearest"}, []any{"correlate", 1, []float64{-0.2, 0, 0.2}, "reflect"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, filt := p(c.name+"/raw"), p(c.name+"/filtered")
			if _, se, code := run(t, append(append(base, c.flags...), "--out", raw)...); code != 0 {
				t.Fatalf("exit %d: %s", code, se)
			}
			args := append(append([]string{}, base...), c.flags...)
			for _, f := range c.filters {
				args = append(args, "--filter", f)
			}
			so, se, code := run(t, append(args, "--out", filt)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, se)
			}
			if !strings.Contains(so, "filtered by ") {
				t.Errorf("result line %q does not name the filter", so)
			}
			arg, _ := json.Marshal(map[string]any{"in": filepath.Join(raw, "drr.npy"), "out": p(c.name + "/scipy.npy"), "stages": c.stages})
			if out, err := exec.Command(py, "-c", scipyDRRFilter, string(arg)).CombinedOutput(); err != nil {
				t.Fatalf("scipy: %v\n%s", err, out)
			}
			_, want, err := npy.ReadAll64(p(c.name + "/scipy.npy"))
			if err != nil {
				t.Fatal(err)
			}
			h, got, err := npy.ReadAll64(filepath.Join(filt, "drr.npy"))
			if err != nil {
				t.Fatal(err)
			}
			if npy.ShapeString(h.Shape) != "(3, 37, 53)" {
				t.Fatalf("drr.npy is %s", npy.ShapeString(h.Shape))
			}
			scale := 0.0
			for _, w := range want {
				scale = max(scale, math.Abs(w))
			}
			for i, w := range want {
				if d := math.Abs(got[i] - w); !(d <= 1e-5*scale) || scale == 0 {
					t.Fatalf("pixel %d: %v, scipy %v (scale %v)", i, got[i], w, scale)
				}
			}
		})
	}
}

// TestDRRFilterBadInput: a malformed stage, or one in mm over poses of
// different pixel sizes, ends the run with one line and nothing written;
// in pixels such poses are filtered.
func TestDRRFilterBadInput(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	geo := anisotropicGeometry(t, dir, 1.5, 2.5)
	b, _ := os.ReadFile(geo)
	var doc map[string]any
	json.Unmarshal(b, &doc)
	doc["poses"].([]any)[2].(map[string]any)["pixel"] = []float64{1.5, 2}
	b, _ = json.Marshal(doc)
	mixed := p("mixed.json")
	os.WriteFile(mixed, b, 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown kind", []string{"--filter", "median:3"}, `--filter "median:3": unknown filter "median"`},
		{"unknown setting", []string{"--filter", "gauss:sigma=1"}, `unknown setting "sigma"; gauss takes sigma_mm or sigma_px`},
		{"no sigma", []string{"--filter", "gauss"}, "give one of sigma_mm"},
		{"two sigmas", []string{"--filter", "gauss:sigma_mm=1,sigma_px=2"}, "give one of sigma_mm"},
		{"zero sigma", []string{"--filter", "gauss:sigma_mm=0"}, "sigma_mm=0: want a positive, finite number"},
		{"NaN sigma", []string{"--filter", "gauss:sigma_px=NaN"}, "want a positive, finite number"},
		{"huge sigma", []string{"--filter", "gauss:sigma_px=1e6"}, "taps; at most"},
		{"box size", []string{"--filter", "box:0"}, "size 0: want a whole number"},
		{"box fraction", []string{"--filter", "box:2.5"}, "size 2.5"},
		{"box without size", []string{"--filter", "box"}, "give the box's size"},
		{"deriv axis", []string{"--filter", "deriv:z"}, `axis "z": want x`},
		{"mode", []string{"--filter", "box:3,mode=wrap"}, "mode=wrap: want reflect"},
		{"mode twice", []string{"--filter", "box:3,mode=nearest,mode=reflect"}, "mode given twice"},
		{"size twice", []string{"--filter", "box:3,size=4"}, "size given twice"},
		{"truncate twice", []string{"--filter", "gauss:sigma_px=1,truncate=3,truncate=4"}, "truncate given twice"},
		{"empty", []string{"--filter", ""}, `unknown filter ""`},
		{"mm over mixed pixels", []string{"--geometry", mixed, "--filter", "gauss:sigma_mm=1"}, "poses 0 and 2 have different pixel sizes"},
		{"deriv over mixed pixels", []string{"--geometry", mixed, "--filter", "deriv:y"}, "poses 0 and 2 have different pixel sizes"},
		{"huge sigma in mm", []string{"--geometry", geo, "--filter", "gauss:sigma_mm=1e6"}, "taps; at most"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := p("out-" + strings.ReplaceAll(c.name, " ", "_"))
			args := append([]string{"drr", "--quiet", "--size", "12", "--detector", "8x8", "--orbit", "2", "--png", "--out", out}, c.args...)
			if slices.Contains(c.args, "--geometry") {
				args = append([]string{"drr", "--quiet", "--size", "12", "--png", "--out", out}, c.args...)
			}
			_, stderr, code := run(t, args...)
			if code != 1 || !strings.HasPrefix(stderr, "tapeloop: ") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stderr %q; want 1 and one line", code, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("error %q does not mention %q", stderr, c.want)
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("output left: %v", entries)
			}
		})
	}
	// Pixels that differ down a column only: σ in pixels, and a
	// derivative along a row, take them.
	if _, se, code := run(t, "drr", "--quiet", "--size", "12", "--geometry", mixed, "--filter", "gauss:sigma_px=1.5", "--filter", "sobel:x,mode=nearest"); code != 0 {
		t.Errorf("σ in pixels over mixed pixel sizes: exit %d: %s", code, se)
	}
}

// TestDRRFilterShardsAgree: shards rendered with different filters do
// not merge; with the same, they merge into what one run writes.
func TestDRRFilterShardsAgree(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	base := []string{"drr", "--quiet", "--size", "16", "--orbit", "4", "--detector", "9x7", "--post", "exp(-p)"}
	shard := func(i int, filter, out string) {
		t.Helper()
		args := append(append([]string{}, base...), "--filter", filter, "--shard", []string{"0/2", "1/2"}[i], "--out", out)
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, se)
		}
	}
	shard(0, "gauss:sigma_mm=1.5", p("a0.npz"))
	shard(1, "gauss:sigma_mm=1.5", p("a1.npz"))
	shard(1, "gauss:sigma_mm=2", p("b1.npz"))
	if _, se, code := run(t, "merge", "--out", p("bad"), p("a0.npz"), p("b1.npz")); code != 1 || !strings.Contains(se, "different run") {
		t.Errorf("shards of different filters merged: exit %d: %s", code, se)
	}
	if _, se, code := run(t, "merge", "--out", p("merged"), p("a0.npz"), p("a1.npz")); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, se)
	}
	if _, se, code := run(t, append(base, "--filter", "gauss:sigma_mm=1.5", "--out", p("whole"))...); code != 0 {
		t.Fatalf("whole: exit %d: %s", code, se)
	}
	want, _ := os.ReadFile(p("whole/drr.npy"))
	if got, _ := os.ReadFile(p("merged/drr.npy")); len(want) == 0 || string(got) != string(want) {
		t.Error("the merged shards differ from one run")
	}
}
