package shard

import (
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

func TestFromEnv(t *testing.T) {
	t.Setenv("JOB_COMPLETION_INDEX", "")
	cases := []struct {
		env  map[string]string
		want int
		ok   bool
	}{
		{map[string]string{"SLURM_ARRAY_TASK_ID": "2"}, 2, true},
		{map[string]string{"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1"}, 3, true},
		{map[string]string{"JOB_COMPLETION_INDEX": "0"}, 0, true},
		{map[string]string{"SLURM_ARRAY_TASK_ID": "4"}, 0, false}, // of 4: out of range
		{map[string]string{"SLURM_ARRAY_TASK_ID": "x"}, 0, false},
		{map[string]string{}, 0, false},
	}
	for _, c := range cases {
		for _, k := range []string{"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "JOB_COMPLETION_INDEX"} {
			if v, ok := c.env[k]; ok {
				t.Setenv(k, v)
			} else {
				t.Setenv(k, "")
				unset(t, k)
			}
		}
		got, err := FromEnv(4)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("env %v: got %d, %v; want %d, ok=%v", c.env, got, err, c.want, c.ok)
		}
	}
}
