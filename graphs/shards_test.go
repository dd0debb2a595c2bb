package graphs

import (
	"strings"
	"testing"
)

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
