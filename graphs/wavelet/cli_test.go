package wavelet_test

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

// The in-process Program against the command line's run of the same
// sweep (package filejob's OpenWavelet, its CSV): the same numbers and the
// same errors.

// waveletCLIRun runs the sweep s as the CLI does and returns its CSV's
// header, its rows parsed (the CSV prints each float64 exactly: the
// shortest form that reads back the same), and the volume it swept.
func waveletCLIRun(t *testing.T, s filejob.WaveletSpec) (header string, rows [][]float64, v []float32, n [3]int) {
	t.Helper()
	var csv bytes.Buffer
	s.Stdout = &csv
	task, err := filejob.OpenWavelet(s, workloadtest.CPU(t, 0, ""), true)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if _, err := engine.Run(t.Context(), task.Job(), engine.RunConfig{MemLimit: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := task.Commit(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(csv.String(), "\n"), "\n")
	for _, l := range lines[1:] {
		var row []float64
		for _, f := range strings.Split(l, ",") {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			row = append(row, x)
		}
		rows = append(rows, row)
	}
	src := wavelet.JobSource(task.Job().(*wavelet.Job))
	return lines[0], rows, src.V, src.N
}

// sweepLists parses a sweep's --theta, --phi and --xi as the CLI does.
func sweepLists(t *testing.T, sw [3]string) (theta, phi, xi []float64) {
	t.Helper()
	var l [3][]float64
	for i, name := range []string{"theta", "phi", "xi"} {
		var err error
		if l[i], err = wavelet.ParseList(name, sw[i]); err != nil {
			t.Fatal(err)
		}
	}
	return l[0], l[1], l[2]
}

// TestCompileWaveletMatchesTheCLIRun: a compiled sweep gives the CLI's
// CSV bit for bit, call after call, through a sweep that needs a larger
// padding (a recompile in reflect mode) and back to a smaller one.
func TestCompileWaveletMatchesTheCLIRun(t *testing.T) {
	sweeps := [][3]string{
		{"0,pi/4", "0", "1,2"},
		{"pi/3,1", "pi/6,0", "0.5,3.25"}, // wider kernels: more padding
		{"0,pi/4", "0", "1,2"},
	}
	cases := []struct {
		name     string
		boundary string
		a        float64
		kernel   string
		stats    []string
		batch    int
	}{
		{"reflect", "reflect", 1, "", []string{"l1=sum(abs(g))", "e2=sum(g^2)"}, 0},
		{"wrap", "wrap", 1.25, "", []string{"l1=sum(abs(g))"}, 3},
		{"reflect kernel formula", "reflect", 0.4, "(3 - q)*exp(-q/2)*(1 + x/20)", []string{"p=max(abs(g))"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := filejob.DefaultWaveletSpec()
			s.Size, s.Seed, s.A, s.Boundary, s.Kernel, s.Stats = "13x11x9", 7, c.a, c.boundary, c.kernel, c.stats
			var p *wavelet.Program
			defer func() {
				if p != nil {
					p.Close()
				}
			}()
			for k, sw := range sweeps {
				s.Theta, s.Phi, s.Xi = sw[0], sw[1], sw[2]
				header, want, v, n := waveletCLIRun(t, s)
				if p == nil {
					var err error
					if p, err = wavelet.Compile(s.Config, v, n, workloadtest.CPU(t, c.batch, "")); err != nil {
						t.Fatal(err)
					}
				}
				if got := strings.Join(p.Columns(), ","); got != header {
					t.Fatalf("columns %q, the CLI's header %q", got, header)
				}
				src := wavelet.ProgramSource(p)
				pad := src.MaxPad
				theta, phi, xi := sweepLists(t, sw)
				w := len(p.Columns())
				got := make([]float64, len(want)*w)
				if err := p.Run(theta, phi, xi, got); err != nil {
					t.Fatal(err)
				}
				for i, row := range want {
					for j, x := range row {
						if g := got[i*w+j]; g != x && !(g != g && x != x) {
							t.Fatalf("sweep %d, row %d, %s: %v, the CLI's %v", k, i, p.Columns()[j], g, x)
						}
					}
				}
				// The first sweep may outgrow the round hat's padding the
				// program starts with; the second outgrows the first's.
				grew := wavelet.ProgramSource(p) != src
				if want := c.boundary == "reflect" && k == 1; k > 0 && grew != want {
					t.Errorf("sweep %d: recompiled %v (padding %v → %v), want %v", k, grew, pad, wavelet.ProgramSource(p).MaxPad, want)
				}
				if r := p.Report(); r.Calls != k+1 || r.LastItems != waveletJob(t, s).Items() {
					t.Errorf("sweep %d: report %d calls of %d items, want %d calls", k, r.Calls, r.LastItems, k+1)
				}
			}
			if dot, err := p.DOT(); err != nil || !strings.Contains(dot, "digraph") {
				t.Errorf("DOT: %v", err)
			}
		})
	}
}

// waveletJob opens s, for its count of computed combinations.
func waveletJob(t *testing.T, s filejob.WaveletSpec) engine.Job {
	t.Helper()
	tk, err := filejob.OpenWavelet(s, workloadtest.CPU(t, 0, ""), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk.Job()
}

// TestCompileWaveletErrors: what the CLI refuses, with its message, and
// the program usable after a refused call.
func TestCompileWaveletErrors(t *testing.T) {
	s := filejob.DefaultWaveletSpec()
	s.Size = "9x8x7"
	n := [3]int{9, 8, 7}
	v := make([]float32, 9*8*7)
	for i := range v {
		v[i] = float32(i%5) - 2
	}
	bad := s
	bad.Stats = []string{"l1=sum(abs(h))"}
	_, cliErr := filejob.OpenWavelet(bad, workloadtest.CPU(t, 0, ""), false)
	if _, err := wavelet.Compile(bad.Config, v, n, workloadtest.CPU(t, 0, "")); err == nil || cliErr == nil || err.Error() != cliErr.Error() {
		t.Errorf("bad formula: %v, the CLI's %v", err, cliErr)
	}
	if _, err := wavelet.Compile(s.Config, v[:10], n, workloadtest.CPU(t, 0, "")); err == nil || !strings.HasPrefix(err.Error(), "--volume") {
		t.Errorf("a volume of the wrong size: %v", err)
	}
	p, err := wavelet.Compile(s.Config, v, n, workloadtest.CPU(t, 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w := len(p.Columns())
	// ξ ≤ 0 has no kernel: its rows are NaN, the others those of a sweep
	// without it; with FailOnNonFinite it is refused as the CLI refuses it.
	strict := s
	strict.FailOnNonFinite = true
	ps, err := wavelet.Compile(strict.Config, v, n, workloadtest.CPU(t, 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	runs := 0 // the calls of p that succeed
	for _, xi := range []string{"1,0", "-1"} {
		theta, phi, x := sweepLists(t, [3]string{s.Theta, s.Phi, xi})
		got := make([]float64, len(theta)*len(phi)*len(x)*w)
		if err := p.Run(theta, phi, x, got); err != nil {
			t.Fatalf("ξ = %s: %v", xi, err)
		}
		runs++
		for i := 0; i < len(got); i += w {
			row, c := got[i:i+w], x[(i/w)%len(x)]
			if c > 0 {
				want := make([]float64, w)
				if err := p.Run([]float64{row[0]}, []float64{row[1]}, []float64{c}, want); err != nil {
					t.Fatal(err)
				}
				runs++
				if !slices.Equal(row, want) {
					t.Errorf("ξ = %s: row %v, alone %v", xi, row, want)
				}
				continue
			}
			for _, v := range row[3:] {
				if !math.IsNaN(v) {
					t.Errorf("ξ = %g has no kernel: row %v, want NaN statistics", c, row)
					break
				}
			}
		}
		strict.Xi = xi
		_, cliErr := filejob.OpenWavelet(strict, workloadtest.CPU(t, 0, ""), false)
		err := ps.Run(theta, phi, x, got)
		if err == nil || cliErr == nil || err.Error() != cliErr.Error() || !strings.HasPrefix(err.Error(), "--fail-on-nonfinite: ") {
			t.Errorf("ξ = %s, failing on non-finite values: %v, the CLI's %v", xi, err, cliErr)
		}
	}
	if err := p.Run([]float64{0}, nil, []float64{1}, nil); err == nil || err.Error() != "--phi: empty list" {
		t.Errorf("no φ: %v", err)
	}
	if err := p.Run([]float64{0}, []float64{0}, []float64{1}, make([]float64, w+1)); !errors.Is(err, engine.ErrBatch) {
		t.Errorf("out of the wrong length: %v, want ErrBatch", err)
	}
	if err := p.Run([]float64{0}, []float64{0}, []float64{1}, make([]float64, w)); err != nil {
		t.Errorf("after refused calls: %v", err)
	}
	if calls := p.Report().Calls; calls != runs+1 {
		t.Errorf("%d calls counted, want %d: refused calls do not count", calls, runs+1)
	}
}
