package graphs

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/ops"
)

func TestParseList(t *testing.T) {
	good := map[string][]float64{
		"1,2,3":     {1, 2, 3},
		"0:pi:4":    {0, math.Pi / 4, math.Pi / 2, 3 * math.Pi / 4},
		"1:20:19":   {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19},
		"pi/4, -pi": {math.Pi / 4, -math.Pi},
		"3*pi/2":    {3 * math.Pi / 2},
		"2pi":       {2 * math.Pi},
		"1e-1":      {0.1},
	}
	for s, want := range good {
		got, err := parseList("x", s)
		if err != nil || len(got) != len(want) {
			t.Errorf("%q: %v, %v", s, got, err)
			continue
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Errorf("%q: element %d = %v, want %v", s, i, got[i], want[i])
			}
		}
	}
	for _, s := range []string{"", "1,,2", "a", "0:pi", "0:pi:0", "0:pi:x", "pi/0", "1:2:3:4", "nan", "inf", "p1"} {
		if _, err := parseList("x", s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestWaveletSpecValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*WaveletSpec)
		want string // "": valid
	}{
		{"defaults", func(*WaveletSpec) {}, ""},
		{"wrap", func(s *WaveletSpec) { s.Boundary = "wrap" }, ""},
		{"boundary empty is reflect", func(s *WaveletSpec) { s.Boundary = "" }, ""},
		{"volume file: size unused", func(s *WaveletSpec) { s.Volume, s.Size = "v.npy", "" }, ""},
		{"xi zero", func(s *WaveletSpec) { s.Xi = "0,1" }, "θ = 0, φ = 0, ξ = 0: wavelet: stretch ξ = 0 must be positive"},
		{"xi negative", func(s *WaveletSpec) { s.Xi = "-1" }, "ξ = -1"},
		{"a zero", func(s *WaveletSpec) { s.A = 0 }, "θ = 0, φ = 0, ξ = 1: wavelet: scale a = 0 must be positive"},
		{"a infinite", func(s *WaveletSpec) { s.A = math.Inf(1) }, "a = +Inf"},
		{"a NaN", func(s *WaveletSpec) { s.A = math.NaN() }, "a = NaN"},
		{"a before xi", func(s *WaveletSpec) { s.A, s.Xi = 0, "0" }, "scale a = 0"},
		{"empty list", func(s *WaveletSpec) { s.Theta = "" }, "--theta: empty list"},
		{"malformed range", func(s *WaveletSpec) { s.Phi = "0:pi" }, `--phi "0:pi": want START:STOP:COUNT`},
		{"zero count", func(s *WaveletSpec) { s.Phi = "0:pi:0" }, "COUNT"},
		{"bad number", func(s *WaveletSpec) { s.Xi = "two" }, `--xi: "two" is not a number`},
		{"NaN angle", func(s *WaveletSpec) { s.Theta = "nan" }, `--theta: "nan" is not a number`},
		{"boundary", func(s *WaveletSpec) { s.Boundary = "mirror" }, `--boundary: unknown boundary "mirror"`},
		{"boundary first", func(s *WaveletSpec) { s.Boundary, s.Xi = "mirror", "0" }, "--boundary"},
		{"size 2-D", func(s *WaveletSpec) { s.Size = "8x8" }, `--size "8x8": want XxYxZ`},
		{"size empty", func(s *WaveletSpec) { s.Size = "" }, "--size"},
		{"size zero", func(s *WaveletSpec) { s.Size = "0x3x3" }, "--size"},
		{"size trailing", func(s *WaveletSpec) { s.Size = "3x3x3x" }, "--size"},
		{"size too large", func(s *WaveletSpec) { s.Size = "1000x1000x1000" }, "--size"},
		{"kernels before size", func(s *WaveletSpec) { s.Size, s.Xi = "8x8", "0" }, "ξ = 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := DefaultWaveletSpec()
			c.edit(&s)
			err := s.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case c.want != "" && err == nil:
				t.Errorf("accepted, want an error with %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

// The sweep's graph is the pipeline: the combinations, the response op
// (convolutions reduced to sums), the statistics op.
func TestWaveletGraph(t *testing.T) {
	d, err := engine.CPU(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	task, err := OpenWavelet(WaveletSpec{Size: "5x6x7", Seed: 3, A: 1, Theta: "0,1", Phi: "0", Xi: "1,2"}, d, false)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	var b bytes.Buffer
	if err := d.WriteDOT(&b, task.Job()); err != nil {
		t.Fatal(err)
	}
	dot := b.String()
	for _, want := range []string{`label="combinations\ninput\n(3, 6) float64`, `label="response\nWaveletResponse{`,
		`label="stats\nWaveletMoments{`, "n0 -> n1;", "n1 -> n2;"} {
		if !strings.Contains(dot, want) {
			t.Errorf("graph lacks %q:\n%s", want, dot)
		}
	}
}

// A replay of the compiled sweep allocates no buffers: every op keeps its
// output and scratch (a kernel array alone is over 100 KiB here). What a
// replay does allocate is bookkeeping: the parallel loops' and the FFT's
// goroutines, Gorgonia's instructions.
func TestWaveletReplayDoesNotAllocate(t *testing.T) {
	d, err := engine.CPU(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	for _, bnd := range []string{"reflect", "wrap"} {
		task, err := OpenWavelet(WaveletSpec{Size: "32x30x28", Seed: 2, A: 1, Theta: "0:pi:3", Phi: "0.4", Xi: "2", Boundary: bnd}, d, false)
		if err != nil {
			t.Fatal(err)
		}
		job := task.Job()
		p, err := engine.Compile(job, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Feed(p.Inputs(), 0, 3); err != nil {
			t.Fatal(err)
		}
		replay := func() {
			if _, err := p.Run(); err != nil {
				t.Fatal(err)
			}
		}
		replay() // the first run allocates the ops' outputs and scratch
		allocs := testing.AllocsPerRun(20, replay)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 20
		for range runs {
			replay()
		}
		runtime.ReadMemStats(&after)
		perRun := float64(after.TotalAlloc-before.TotalAlloc) / runs
		t.Logf("%s: %.0f allocations, %.0f bytes per replay", bnd, allocs, perRun)
		if allocs > 64*3 {
			t.Errorf("%s: %.0f allocations per replay of 3 kernels, want ≤ 192", bnd, allocs)
		}
		if perRun > 48<<10 {
			t.Errorf("%s: %.0f bytes allocated per replay, want ≤ 48 KiB", bnd, perRun)
		}
		p.Close()
		task.Close()
	}
}

// The CSV goes to Stdout without Out, to Out (renamed into place on
// Commit) with it, and nowhere before Commit or after Close; a run closed
// before Commit leaves only its checkpoint.
func TestWaveletTaskOutput(t *testing.T) {
	d, err := engine.CPU(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	d = d.Quiet()
	spec := WaveletSpec{Size: "6x5x4", Seed: 1, A: 1, Theta: "0,0.5", Phi: "1", Xi: "1,2", Boundary: "wrap"}
	var stdout bytes.Buffer
	spec.Stdout = &stdout
	task, err := OpenWavelet(spec, d, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(t.Context(), task.Job()); err != nil {
		t.Fatal(err)
	}
	if stdout.Len() != 0 {
		t.Errorf("%d bytes written before Commit", stdout.Len())
	}
	if err := task.Commit(); err != nil {
		t.Fatal(err)
	}
	task.Close()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 5 || lines[0] != "theta,phi,xi,energy,std,max,wavelet_energy" || !strings.HasPrefix(lines[1], "0,1,1,") {
		t.Fatalf("CSV:\n%s", stdout.String())
	}

	dir := t.TempDir()
	spec.Out = filepath.Join(dir, "stats.csv")
	for _, commit := range []bool{false, true} {
		spec.Resume = commit // the run not committed left its checkpoint
		task, err := OpenWavelet(spec, d, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Run(t.Context(), task.Job()); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := task.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		task.Close()
		got, err := os.ReadFile(spec.Out)
		if !commit {
			if err == nil {
				t.Error("an output not committed was left behind")
			}
			if _, err := os.Stat(spec.Out + ".ckpt"); err != nil {
				t.Errorf("no checkpoint kept: %v", err)
			}
			continue
		}
		if err != nil || string(got) != stdout.String() {
			t.Errorf("file holds %q (%v), want the CSV written to Stdout", got, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the output directory, want 1", len(entries))
	}
}

// TestWaveletPadsCoverEachKernel checks every combination's reflect
// padding against its own kernel's half-widths, on random sweeps, and that
// sizes are shared: a lone narrow kernel joins a large group, two large
// groups keep their own sizes.
func TestWaveletPadsCoverEachKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	for range 20 {
		n := [3]int{20 + rng.IntN(60), 20 + rng.IntN(60), 20 + rng.IntN(60)}
		a := 0.5 + rng.Float64()*2
		var combos []Combo
		for range 1 + rng.IntN(40) {
			combos = append(combos, Combo{Theta: rng.Float64() * math.Pi, Phi: rng.Float64() * math.Pi, Xi: []float64{0.5, 1, 2, 4}[rng.IntN(4)]})
		}
		pads, largest := WaveletPads(n, a, combos)
		for i, c := range combos {
			h := ops.HatSupport(a, c.Theta, c.Phi, c.Xi)
			for k := range 3 {
				if pads[i][k] < h[k] || pads[i][k] > largest[k] {
					t.Fatalf("n=%v a=%g %+v: padding %v for half-widths %v (largest %v)", n, a, c, pads[i], h, largest)
				}
			}
		}
	}
	need := [][3]int{}
	for range 50 {
		need = append(need, [3]int{250, 250, 250})
	}
	for range 50 {
		need = append(need, [3]int{216, 216, 216})
	}
	need = append(need, [3]int{225, 216, 216}) // alone: joins the 250s' or 216s' size
	got := reflectGroups(need)
	sizes := map[[3]int]int{}
	for _, d := range got {
		sizes[d]++
	}
	if len(sizes) != 2 || sizes[[3]int{250, 250, 250}] < 50 || (sizes[[3]int{216, 216, 216}] != 50 && sizes[[3]int{225, 216, 216}] != 51) {
		t.Errorf("groups %v, want the 250s and the 216s kept, the lone size merged", sizes)
	}
	if got[len(got)-1][0] < 225 {
		t.Errorf("the lone combination runs on %v, smaller than it needs", got[len(got)-1])
	}
}
