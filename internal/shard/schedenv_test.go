package shard

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestFromEnvSchedulerValues: every value a scheduler variable may hold
// that is not a plain task number, or that does not give a shard of
// --shards, is refused with one line naming the variable and its value;
// the good ones give the shard an independent count says.
func TestFromEnvSchedulerValues(t *testing.T) {
	const count = 4
	type env = map[string]string
	good := []struct {
		env  env
		want int
	}{
		{env{"SLURM_ARRAY_TASK_ID": "0"}, 0},
		{env{"SLURM_ARRAY_TASK_ID": "3"}, 3},
		{env{"SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_MIN": "5"}, 3},
		{env{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "5"}, 0},
		{env{"SLURM_ARRAY_TASK_ID": "9223372036854775807", "SLURM_ARRAY_TASK_MIN": "9223372036854775805"}, 2},
		{env{"JOB_COMPLETION_INDEX": "2"}, 2},
		{env{"SLURM_ARRAY_TASK_ID": "1", "JOB_COMPLETION_INDEX": "3"}, 1}, // SLURM's first
	}
	for _, c := range good {
		got, err := FromEnv(count, lookupIn(c.env))
		if err != nil || got != c.want {
			t.Errorf("%v: got %d, %v; want %d", c.env, got, err, c.want)
		}
	}
	bad := []struct {
		env  env
		says []string // the message names these
	}{
		{env{"SLURM_ARRAY_TASK_ID": "9223372036854775807", "SLURM_ARRAY_TASK_MIN": "-1"}, []string{`SLURM_ARRAY_TASK_MIN="-1"`}},
		{env{"SLURM_ARRAY_TASK_ID": "9223372036854775807"}, []string{`SLURM_ARRAY_TASK_ID="9223372036854775807"`, "outside 0…3"}},
		{env{"SLURM_ARRAY_TASK_ID": "9223372036854775808"}, []string{`SLURM_ARRAY_TASK_ID="9223372036854775808"`, "too large"}},
		{env{"SLURM_ARRAY_TASK_ID": "99999999999999999999999"}, []string{`SLURM_ARRAY_TASK_ID="99999999999999999999999"`}},
		{env{"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "5"}, []string{`SLURM_ARRAY_TASK_ID="2"`, `SLURM_ARRAY_TASK_MIN="5"`, "below"}},
		{env{"SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "5"}, []string{`SLURM_ARRAY_TASK_ID="12"`, `SLURM_ARRAY_TASK_MIN="5"`, "shard 7", "outside 0…3"}},
		{env{"SLURM_ARRAY_TASK_ID": "-1"}, []string{`SLURM_ARRAY_TASK_ID="-1"`, "negative"}},
		{env{"SLURM_ARRAY_TASK_ID": "-9223372036854775808", "SLURM_ARRAY_TASK_MIN": "-9223372036854775808"}, []string{`SLURM_ARRAY_TASK_ID="-9223372036854775808"`}},
		{env{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "-3"}, []string{`SLURM_ARRAY_TASK_MIN="-3"`}},
		{env{"SLURM_ARRAY_TASK_ID": "+3"}, []string{`SLURM_ARRAY_TASK_ID="+3"`}},
		{env{"SLURM_ARRAY_TASK_ID": " 3"}, []string{`SLURM_ARRAY_TASK_ID=" 3"`}},
		{env{"SLURM_ARRAY_TASK_ID": "3 "}, []string{`SLURM_ARRAY_TASK_ID="3 "`}},
		{env{"SLURM_ARRAY_TASK_ID": "3\n"}, []string{`SLURM_ARRAY_TASK_ID="3\n"`}},
		{env{"SLURM_ARRAY_TASK_ID": "0x3"}, []string{`SLURM_ARRAY_TASK_ID="0x3"`}},
		{env{"SLURM_ARRAY_TASK_ID": "03"}, []string{`SLURM_ARRAY_TASK_ID="03"`, "leading zero"}},
		{env{"SLURM_ARRAY_TASK_ID": "3.0"}, []string{`SLURM_ARRAY_TASK_ID="3.0"`}},
		{env{"SLURM_ARRAY_TASK_ID": "1e2"}, []string{`SLURM_ARRAY_TASK_ID="1e2"`}},
		{env{"SLURM_ARRAY_TASK_ID": "٣"}, []string{`SLURM_ARRAY_TASK_ID="٣"`}},
		{env{"SLURM_ARRAY_TASK_ID": ""}, []string{`SLURM_ARRAY_TASK_ID=""`, "empty"}},
		{env{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": ""}, []string{`SLURM_ARRAY_TASK_MIN=""`}},
		{env{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "0x1"}, []string{`SLURM_ARRAY_TASK_MIN="0x1"`}},
		{env{"SLURM_ARRAY_TASK_ID": "4"}, []string{`SLURM_ARRAY_TASK_ID="4"`, "shard 4", "outside 0…3", "--shards 4"}},
		{env{"JOB_COMPLETION_INDEX": "4"}, []string{`JOB_COMPLETION_INDEX="4"`, "outside 0…3"}},
		{env{"JOB_COMPLETION_INDEX": "-1"}, []string{`JOB_COMPLETION_INDEX="-1"`}},
		{env{"JOB_COMPLETION_INDEX": "18446744073709551616"}, []string{`JOB_COMPLETION_INDEX="18446744073709551616"`}},
		{env{"JOB_COMPLETION_INDEX": " 1"}, []string{`JOB_COMPLETION_INDEX=" 1"`}},
		{env{"SLURM_ARRAY_TASK_ID": "x", "JOB_COMPLETION_INDEX": "1"}, []string{`SLURM_ARRAY_TASK_ID="x"`}},
		{env{"SLURM_ARRAY_TASK_MIN": "0"}, []string{"SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX"}},
	}
	for _, c := range bad {
		got, err := FromEnv(count, lookupIn(c.env))
		if err == nil {
			t.Errorf("%q: shard %d, want an error", c.env, got)
			continue
		}
		msg := err.Error()
		if testing.Verbose() {
			t.Log(msg)
		}
		if !errors.Is(err, ErrShards) || strings.Contains(msg, "\n") {
			t.Errorf("%q: error %q is not one line wrapping ErrShards", c.env, msg)
		}
		for _, s := range c.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%q: error %q does not say %s", c.env, msg, s)
			}
		}
	}
}

// TestFromEnvEveryTask: each task of an array --array=MIN-MAX gets its own
// shard, the shards of all the tasks together being 0…count−1 once each.
func TestFromEnvEveryTask(t *testing.T) {
	for _, lo := range []int{0, 1, 7, 1000} {
		const count = 5
		seen := map[int]bool{}
		for id := lo; id < lo+count; id++ {
			e := map[string]string{"SLURM_ARRAY_TASK_ID": strconv.Itoa(id), "SLURM_ARRAY_TASK_MIN": strconv.Itoa(lo)}
			i, err := FromEnv(count, lookupIn(e))
			if err != nil || seen[i] || i < 0 || i >= count {
				t.Fatalf("%v: shard %d, %v (seen %v)", e, i, err, seen)
			}
			seen[i] = true
		}
	}
}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}
