package filejob

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRunPrintValues checks that a fingerprint hashes float32 values as
// their little-endian bytes, after their count, whatever the machine's
// byte order: a checkpoint written by one build must be resumable by the
// next. The reference is built here value by value.
func TestRunPrintValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 41))
	for _, n := range []int{0, 1, 3, 2047, 2048, 2049, 100003} {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()*10))
		}
		if n > 2 {
			v[1], v[2] = float32(math.NaN()), float32(math.Inf(-1))
		}
		f := newRunPrint("w")
		f.f32s(v)
		h := sha256.New()
		for _, s := range []string{"w", fmt.Sprint(n)} {
			h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(s))))
			h.Write([]byte(s))
		}
		for _, x := range v {
			h.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)))
		}
		if got, want := f.sum(), hex.EncodeToString(h.Sum(nil)[:16]); got != want {
			t.Errorf("%d values: fingerprint %s, want %s", n, got, want)
		}
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
