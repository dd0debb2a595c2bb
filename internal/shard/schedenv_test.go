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
		// The task number is the shard, whatever the array's first task:
		// a resubmission of tasks 1 and 3 (--array=1,3) sets MIN=1.
		{env{"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "2"}, 3},
		{env{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "2"}, 1},
		{env{"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "5"}, 2},
		{env{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "x"}, 1},
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
		{env{"SLURM_ARRAY_TASK_ID": "9223372036854775807"}, []string{`SLURM_ARRAY_TASK_ID="9223372036854775807"`, "outside 0…3", "--array=0-3"}},
		{env{"SLURM_ARRAY_TASK_ID": "9223372036854775808"}, []string{`SLURM_ARRAY_TASK_ID="9223372036854775808"`, "too large"}},
		{env{"SLURM_ARRAY_TASK_ID": "99999999999999999999999"}, []string{`SLURM_ARRAY_TASK_ID="99999999999999999999999"`}},
		// An array that starts at 1 (--array=1-4) has no task 0 and a
		// task 4: refused, never shifted onto shard 3.
		{env{"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1"}, []string{`SLURM_ARRAY_TASK_ID="4"`, "shard 4", "outside 0…3", "--array=0-3"}},
		{env{"SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "5"}, []string{`SLURM_ARRAY_TASK_ID="12"`, "shard 12", "outside 0…3", "--array=0-3"}},
		{env{"SLURM_ARRAY_TASK_ID": "-1"}, []string{`SLURM_ARRAY_TASK_ID="-1"`, "negative"}},
		{env{"SLURM_ARRAY_TASK_ID": "-9223372036854775808", "SLURM_ARRAY_TASK_MIN": "-9223372036854775808"}, []string{`SLURM_ARRAY_TASK_ID="-9223372036854775808"`}},
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
		{env{"SLURM_ARRAY_TASK_ID": "4"}, []string{`SLURM_ARRAY_TASK_ID="4"`, "shard 4", "outside 0…3", "--shards 4", "--array=0-3"}},
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

// TestFromEnvResubmittedTasks: the tasks of an array --array=0-7 give
// shards 0…7 once each, and resubmitting two of them (--array=3,7, which
// SLURM runs with SLURM_ARRAY_TASK_MIN=3 and SLURM_ARRAY_TASK_COUNT=2)
// computes those two shards again, not shards 0 and 4.
func TestFromEnvResubmittedTasks(t *testing.T) {
	const count = 8
	for id := range count {
		e := map[string]string{"SLURM_ARRAY_TASK_ID": strconv.Itoa(id), "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "8"}
		if i, err := FromEnv(count, lookupIn(e)); err != nil || i != id {
			t.Errorf("%v: shard %d, %v; want %d", e, i, err, id)
		}
	}
	for _, id := range []int{3, 7} {
		e := map[string]string{"SLURM_ARRAY_TASK_ID": strconv.Itoa(id), "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "7", "SLURM_ARRAY_TASK_COUNT": "2"}
		if i, err := FromEnv(count, lookupIn(e)); err != nil || i != id {
			t.Errorf("resubmitted %v: shard %d, %v; want %d", e, i, err, id)
		}
	}
}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}
