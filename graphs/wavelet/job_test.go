package wavelet

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/ops"
)

// sweep is the combinations of the lists theta, phi and xi, written as
// on the command line, for kernels of scale a.
func sweep(t testing.TB, a float64, theta, phi, xi string) []Combo {
	t.Helper()
	var l [3][]float64
	for i, s := range []string{theta, phi, xi} {
		var err error
		if l[i], err = ParseList([]string{"theta", "phi", "xi"}[i], s); err != nil {
			t.Fatal(err)
		}
	}
	combos, err := Sweep(a, l[0], l[1], l[2])
	if err != nil {
		t.Fatal(err)
	}
	return combos
}

// sweepJob is the Job of the sweep over a volume of n standard normals
// from seed, as the command line sets it up (package filejob's
// OpenWavelet) without outputs.
func sweepJob(t testing.TB, n [3]int, seed uint64, a float64, bnd ops.Boundary, theta, phi, xi string) *Job {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed0002))
	v := make([]float32, n[0]*n[1]*n[2])
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	combos := sweep(t, a, theta, phi, xi)
	_, pad := HatPads(n, a, combos)
	src, err := ops.NewWaveletSource(v, n, a, bnd, pad)
	if err != nil {
		t.Fatal(err)
	}
	sup, _ := Supports(a, nil, combos)
	src.MaxSupport = MaxSupport(sup)
	job, err := New(Setup{Src: src, Combos: combos})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

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
		got, err := ParseList("x", s)
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
		if _, err := ParseList("x", s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// The sweep's graph is the pipeline: the combinations, the response op
// (convolutions reduced to sums), the statistics op.
func TestWaveletGraph(t *testing.T) {
	d, err := engine.CPU(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	job := sweepJob(t, [3]int{5, 6, 7}, 3, 1, ops.Reflect, "0,1", "0", "1,2")
	var b bytes.Buffer
	if err := d.WriteDOT(&b, job); err != nil {
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
	for _, bnd := range []ops.Boundary{ops.Reflect, ops.Wrap} {
		job := sweepJob(t, [3]int{32, 30, 28}, 2, 1, bnd, "0:pi:3", "0.4", "2")
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
	}
}

// TestWaveletShardRunsAsInTheSweep: in reflect mode a combination's
// padding depends on the other combinations of the run (Pads
// merges transform sizes across the sweep), so a shard must pad as the
// whole sweep does; and a combination whose kernel it shares with an
// earlier one, maybe of another shard, takes that one's statistics.
func TestWaveletShardRunsAsInTheSweep(t *testing.T) {
	n := [3]int{20, 18, 16}
	combos := sweep(t, 1, "0:pi:3", "0:pi:2", "1,1.5,2.5,4")
	full, _ := HatPads(n, 1, combos)
	differs := false
	for i := range combos {
		alone, _ := HatPads(n, 1, combos[i:i+1])
		differs = differs || alone[0] != full[i]
	}
	if !differs {
		t.Fatal("every combination pads alone as in the sweep: this test no longer shows anything")
	}
	src, err := ops.NewWaveletSource(make([]float32, n[0]*n[1]*n[2]), n, 1, ops.Reflect, [3]int{30, 30, 30})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := New(Setup{Src: src, Combos: combos})
	if err != nil {
		t.Fatal(err)
	}
	rep := map[int]int{} // per combination, the one computed for it in the whole sweep
	for _, i := range whole.order {
		rep[i] = i
		for _, j := range whole.same[i] {
			rep[j] = i
		}
	}
	for _, r := range [][2]int{{0, 8}, {8, 16}, {16, 24}, {5, 6}, {9, 10}} {
		w, err := New(Setup{Src: src, Combos: combos, Lo: r[0], Hi: r[1]})
		if err != nil {
			t.Fatal(err)
		}
		covered := map[int]bool{}
		for _, i := range w.order {
			if w.pad[i] != full[i] {
				t.Errorf("[%d, %d): combination %d pads %v, the sweep %v", r[0], r[1], i, w.pad[i], full[i])
			}
			if rep[i] != i {
				t.Errorf("[%d, %d): computes combination %d, which the sweep takes from %d", r[0], r[1], i, rep[i])
			}
			covered[i] = true
			for _, j := range w.same[i] {
				covered[j] = true
				if rep[j] != i || j < r[0] || j >= r[1] {
					t.Errorf("[%d, %d): combination %d takes %d's statistics; the sweep takes %d's", r[0], r[1], j, i, rep[j])
				}
			}
		}
		for i := r[0]; i < r[1]; i++ {
			if !covered[i] {
				t.Errorf("[%d, %d): combination %d is neither computed nor taken from another", r[0], r[1], i)
			}
		}
	}
	if _, err := New(Setup{Src: src, Combos: combos, Lo: 3, Hi: 99}); err == nil {
		t.Error("combinations [3, 99) of 24: no error")
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
		pads, largest := HatPads(n, a, combos)
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

// TestColumnsSkipPasses: what a sweep's columns leave out of the response
// op, with statistics of the user's (computed whatever the columns), and
// the columns and passes its report gives.
func TestColumnsSkipPasses(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Stats = []string{"l1=sum(abs(g))", "m2=max(g)*2"}
	p, err := cfg.Parse()
	if err != nil {
		t.Fatal(err)
	}
	n := [3]int{9, 7, 11}
	f, err := p.Formulas(n, false)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, n[0]*n[1]*n[2])
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	for _, c := range []struct {
		bnd     ops.Boundary
		columns []string
		header  string
		passes  string
	}{
		{ops.Wrap, nil, "theta,phi,xi,energy,std,max,wavelet_energy,l1,m2", "inverse transform: yes; Σ G, Σ G²: from the spectrum (Parseval); max: yes; formula passes: l1, m2"},
		{ops.Wrap, []string{"std"}, "theta,phi,xi,std,l1,m2", "inverse transform: yes; Σ G, Σ G²: from the spectrum (Parseval); max: no; formula passes: l1, m2"},
		{ops.Reflect, []string{"max", "wavelet_energy"}, "theta,phi,xi,max,wavelet_energy,l1,m2", "inverse transform: yes; Σ G, Σ G²: no; max: yes; formula passes: l1, m2"},
		{ops.Reflect, []string{"energy"}, "theta,phi,xi,energy,l1,m2", "inverse transform: yes; Σ G, Σ G²: over the response; max: no; formula passes: l1, m2"},
	} {
		src, err := ops.NewWaveletSource(v, n, 1, c.bnd, [3]int{12, 12, 12})
		if err != nil {
			t.Fatal(err)
		}
		src.Formulas = f
		job, err := New(Setup{Src: src, Combos: []Combo{{0.3, 0.4, 2}}, Columns: c.columns})
		if err != nil {
			t.Fatal(err)
		}
		if h := job.Header(); h != c.header {
			t.Errorf("%v %q: header %q, want %q", c.bnd, c.columns, h, c.header)
		}
		if got := job.Passes(false).String(); got != c.passes {
			t.Errorf("%v %q: passes %q, want %q", c.bnd, c.columns, got, c.passes)
		}
		if got := job.Passes(true); got.Sums != ops.SumsFromResponse || !got.InverseTransform || !got.Max {
			t.Errorf("%v %q: on a GPU %v, want every pass", c.bnd, c.columns, got)
		}
	}
	// Without statistics of the user's, energy and std in wrap mode run
	// no inverse transform.
	job := sweepJob(t, n, 3, 1, ops.Wrap, "0", "0", "1")
	job.cfg.Src.Skip, _ = skipFor(ColumnSet{true, true, false, false}, nil)
	if got := job.Passes(false); got.InverseTransform || got.Max || got.Sums != ops.SumsFromSpectrum {
		t.Errorf("energy and std in wrap mode: %v", got)
	}
}
