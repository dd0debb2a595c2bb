package shard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRowsCoverExactlyOnce(t *testing.T) {
	for _, n := range []int{1, 7, 100, 10007} {
		for _, count := range []int{1, 2, 3, 8, 13} {
			next := 0
			for i := range count {
				lo, hi := Rows(i, count, n)
				if lo != next || hi < lo {
					t.Fatalf("n=%d count=%d: shard %d is [%d, %d), want start %d", n, count, i, lo, hi, next)
				}
				next = hi
			}
			if next != n {
				t.Fatalf("n=%d count=%d: shards end at %d", n, count, next)
			}
		}
	}
}

func TestParse(t *testing.T) {
	if i, n, err := Parse("3/8"); err != nil || i != 3 || n != 8 {
		t.Errorf("Parse(3/8) = %d, %d, %v", i, n, err)
	}
	for _, s := range []string{"", "3", "8/8", "-1/4", "a/b", "1/0", "1/2/3"} {
		if _, _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q): no error", s)
		}
	}
}

// TestMergeRefusesMixedDevices: affinity shards computed on the CPU and on
// a GPU, or with and without --tf32, or of an earlier release (which does
// not record its device) and of this one, are refused, naming both shards
// and what each was computed on; shards of one device merge, and so do
// shards that all record none.
func TestMergeRefusesMixedDevices(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lo, hi, index int, device string) string {
		meta := fmt.Sprintf(`{"format":"tapeloop-affinity-shard/1","n":2,"d":3,"metric":"dot","dtype":"float32","fingerprint":"f","lo":%d,"hi":%d,"index":%d,"count":2%s}`,
			lo, hi, index, device)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, shardFile([]byte(meta), []byte("affinity.npy"), member("<f4", "(1, 2)", make([]byte, 8))), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i, c := range []struct {
		a, b string // meta.json's device fields of shards 0 and 1
		want string // "" merges
	}{
		{`,"device":"cpu"`, `,"device":"cpu"`, ""},
		{`,"device":"cuda","tf32":true`, `,"device":"cuda","tf32":true`, ""},
		{``, ``, ""},
		{`,"device":"cpu"`, `,"device":"cuda"`, "was computed on cuda and"},
		{`,"device":"cuda"`, `,"device":"cuda","tf32":true`, "was computed on cuda with --tf32 and"},
		{`,"device":"cuda"`, ``, "was computed on a device it does not record (an earlier tapeloop) and"},
		{`,"device":"tpu"`, `,"device":"tpu"`, `device "tpu"`},
	} {
		s0, s1 := write(fmt.Sprintf("a%d.npz", i), 0, 1, 0, c.a), write(fmt.Sprintf("b%d.npz", i), 1, 2, 1, c.b)
		out := filepath.Join(dir, fmt.Sprintf("m%d.npy", i))
		err := Merge(out, []string{s0, s1})
		if c.want == "" {
			if err != nil {
				t.Errorf("case %d: %v, want merged", i, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrShards) {
			t.Errorf("case %d: %v, want an error saying %q", i, err, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("case %d: wrote %s", i, out)
		}
	}
}
