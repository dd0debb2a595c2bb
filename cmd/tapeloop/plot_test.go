package main

import (
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotDrawsWhatTheCommandsWrite draws the outputs of small runs of
// wavelet (its CSV and --report), affinity, drr and register as PNG and
// SVG.
func TestPlotDrawsWhatTheCommandsWrite(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, args := range [][]string{
		{"wavelet", "-q", "--size", "12x12x12", "--theta", "0:pi:3", "--phi", "0:pi:2", "--xi", "1,2", "--out", p("sweep.csv"), "--report", p("report.json")},
		{"affinity", "-q", "-n", "21", "--height", "5", "--width", "7", "--metric", "cosine", "--out", p("A.npy")},
		{"affinity", "-q", "-n", "21", "--height", "5", "--width", "7", "--metric", "cosine", "--topk", "3", "--out", p("top.npz")},
		{"drr", "-q", "--size", "24", "--orbit", "3", "--detector", "12x16", "--out", p("drr")},
	} {
		if _, se, code := run(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, se)
		}
	}
	trace := "step,level,loss,rx,ry,rz,tx,ty,tz,seconds\n0,0,1.08,0.05,0,0,1,0,0,0.0005\n1,0,0.9,0.04,0,0,0.9,0.1,0,0.001\n2,1,0.3,0.01,0,0,0.5,0.1,0,0.002\n"
	if err := os.WriteFile(p("trace.csv"), []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"sweep.csv", "report.json", "A.npy", "top.npz", filepath.Join("drr", "drr.npy"), "trace.csv"} {
		for _, ext := range []string{".png", ".svg"} {
			out := p(strings.ReplaceAll(in, "/", "-") + ext)
			if so, se, code := run(t, "plot", p(in), "--out", out); code != 0 || so != "" || se != "" {
				t.Fatalf("plot %s --out %s: exit %d, stdout %q, stderr %q", in, ext, code, so, se)
			}
			if ext == ".png" {
				f, err := os.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				_, err = png.Decode(f)
				f.Close()
				if err != nil {
					t.Errorf("%s: %v", out, err)
				}
			}
		}
	}
	// Flags before the file, a size and a column.
	if _, se, code := run(t, "plot", "--column", "std", "--size", "320x240", "--out", p("std.png"), p("sweep.csv")); code != 0 {
		t.Fatalf("plot --column std: exit %d: %s", code, se)
	}
	f, err := os.Open(p("std.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width != 320 || cfg.Height != 240 {
		t.Errorf("--size 320x240: %dx%d, %v", cfg.Width, cfg.Height, err)
	}
}

// TestPlotBadInput checks each refusal: one line on stderr, exit status 1,
// no figure written.
func TestPlotBadInput(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	files := map[string]string{
		"sweep.csv": "theta,phi,xi,energy,std\n0,0,1,5,1\n0,1,1,6,2\n",
		"empty.csv": "",
		"x.json":    `{"name": "not a report"}`,
		"x.txt":     "1\n",
	}
	for name, data := range files {
		if err := os.WriteFile(p(name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{p("sweep.csv"), "--column", "nope", "--out", p("f.png")}, `no column "nope" (--column takes one of energy, std)`},
		{[]string{p("empty.csv"), "--out", p("f.png")}, "the file is empty"},
		{[]string{p("x.json"), "--out", p("f.svg")}, "not a tapeloop report"},
		{[]string{p("x.txt"), "--out", p("f.png")}, `unknown input extension ".txt"`},
		{[]string{p("sweep.csv"), "--out", p("f.jpg")}, `unknown output extension ".jpg" (want .png or .svg)`},
		{[]string{p("missing.csv"), "--out", p("f.png")}, "no such file or directory"},
		{[]string{p("sweep.csv")}, "--out FIG.png or FIG.svg is required"},
		{[]string{"--out", p("f.png")}, "no FILE to draw"},
		{[]string{p("sweep.csv"), p("empty.csv"), "--out", p("f.png")}, "one FILE at a time"},
		{[]string{p("sweep.csv"), "--size", "big", "--out", p("f.png")}, `--size "big"`},
		{[]string{p("sweep.csv"), "--bogus", "--out", p("f.png")}, "flag provided but not defined: -bogus"},
		{[]string{p("sweep.csv"), "--out", p("f.png"), "--out", p("f.svg")}, "--out given twice"},
		{[]string{"--out", p("f.png"), p("sweep.csv"), "--out", p("f.svg")}, "--out given twice"},
	} {
		so, se, code := run(t, append([]string{"plot"}, c.args...)...)
		lines := strings.Split(strings.TrimSuffix(se, "\n"), "\n")
		if code != 1 || so != "" || len(lines) != 1 || !strings.HasPrefix(se, "tapeloop: plot: ") || !strings.Contains(se, c.want) {
			t.Errorf("plot %s: exit %d, stdout %q, stderr %q; want exit 1 and one line saying %q", strings.Join(c.args, " "), code, so, se, c.want)
		}
		for _, out := range []string{"f.png", "f.svg", "f.jpg"} {
			if _, err := os.Stat(p(out)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("plot %s: %s was written", strings.Join(c.args, " "), out)
			}
		}
	}
	if left, _ := filepath.Glob(p(".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestPlotEmptyValuesAfterFile: flags after FILE are refused empty as
// those before it are.
func TestPlotEmptyValuesAfterFile(t *testing.T) {
	for _, c := range [][]string{{"--out", "", "--out: empty path"}, {"--column", " ", "--column: empty value"}, {"--size", "", "--size: empty value"}} {
		args := []string{"plot", "sweep.csv", c[0], c[1]}
		if c[0] != "--out" {
			args = append(args, "--out", "f.png")
		}
		refusedBeforeWork(t, args, c[2])
	}
}
