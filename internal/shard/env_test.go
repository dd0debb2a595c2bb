package shard

import "testing"

func TestFromEnv(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want int
		ok   bool
	}{
		{map[string]string{"SLURM_ARRAY_TASK_ID": "2"}, 2, true},
		{map[string]string{"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1"}, 3, true},
		{map[string]string{"JOB_COMPLETION_INDEX": "0"}, 0, true},
		{map[string]string{"SLURM_ARRAY_TASK_ID": "4"}, 0, false}, // of 4: out of range
		{map[string]string{"SLURM_ARRAY_TASK_ID": "x"}, 0, false},
		{map[string]string{}, 0, false},
	}
	for _, c := range cases {
		lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		got, err := FromEnv(4, lookup)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("env %v: got %d, %v; want %d, ok=%v", c.env, got, err, c.want, c.ok)
		}
	}
	if _, err := FromEnv(0, nil); err == nil {
		t.Error("FromEnv(0): no error")
	}
}

// TestFromEnvReadsTheProcess: a nil lookup reads the process's environment.
func TestFromEnvReadsTheProcess(t *testing.T) {
	t.Setenv("SLURM_ARRAY_TASK_ID", "1")
	t.Setenv("SLURM_ARRAY_TASK_MIN", "0")
	if i, err := FromEnv(3, nil); err != nil || i != 1 {
		t.Errorf("FromEnv(3, nil) = %d, %v; want 1", i, err)
	}
}
