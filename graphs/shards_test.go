package graphs

import (
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/ops"
)

// TestWaveletShardRunsAsInTheSweep: in reflect mode a combination's
// padding depends on the other combinations of the run (WaveletPads
// merges transform sizes across the sweep), so a shard must pad as the
// whole sweep does; and a combination whose kernel it shares with an
// earlier one, maybe of another shard, takes that one's statistics.
func TestWaveletShardRunsAsInTheSweep(t *testing.T) {
	n := [3]int{20, 18, 16}
	th, _ := parseList("theta", "0:pi:3")
	ph, _ := parseList("phi", "0:pi:2")
	xi, _ := parseList("xi", "1,1.5,2.5,4")
	combos := Combos(th, ph, xi)
	full, _ := WaveletPads(n, 1, combos)
	differs := false
	for i := range combos {
		alone, _ := WaveletPads(n, 1, combos[i:i+1])
		differs = differs || alone[0] != full[i]
	}
	if !differs {
		t.Fatal("every combination pads alone as in the sweep: this test no longer shows anything")
	}
	src, err := ops.NewWaveletSource(make([]float32, n[0]*n[1]*n[2]), n, 1, ops.Reflect, [3]int{30, 30, 30})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := NewWavelet(WaveletConfig{Src: src, Combos: combos})
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
		w, err := NewWavelet(WaveletConfig{Src: src, Combos: combos, Lo: r[0], Hi: r[1]})
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
	if _, err := NewWavelet(WaveletConfig{Src: src, Combos: combos, Lo: 3, Hi: 99}); err == nil {
		t.Error("combinations [3, 99) of 24: no error")
	}
}

func TestShardSpecValidate(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	noEnv := func(string) (string, bool) { return "", false }
	w := DefaultWaveletSpec()
	d := DefaultDRRSpec()
	for _, c := range []struct {
		name   string
		shard  *string
		shards *int
		out    string
		want   string
	}{
		{"both", str("0/2"), num(2), "s.npz", "give one"},
		{"out of range", str("2/2"), nil, "s.npz", "2/2"},
		{"bad format", str("1-2"), nil, "s.npz", "--shard"},
		{"no env", nil, num(2), "s.npz", "SLURM_ARRAY_TASK_ID"},
		{"zero shards", nil, num(0), "s.npz", "--shards"},
		{"not npz", str("0/2"), nil, "s.csv", ".npz"},
	} {
		w.Shard, w.Shards, w.Out, w.Env = c.shard, c.shards, c.out, noEnv
		if err := w.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("wavelet %s: %v, want an error with %q", c.name, err, c.want)
		}
		d.Shard, d.Shards, d.Out, d.Env = c.shard, c.shards, c.out, noEnv
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("drr %s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	w.Shard, w.Shards, w.Out = nil, num(4), "s.npz"
	w.Env = func(k string) (string, bool) { return "3", k == "JOB_COMPLETION_INDEX" }
	if err := w.Validate(); err != nil {
		t.Errorf("wavelet --shards 4 with JOB_COMPLETION_INDEX=3: %v", err)
	}
}
