package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestThreadsFollowSLURM: under SLURM with TaskPlugin=task/none nothing
// but SLURM_CPUS_PER_TASK holds a task to its CPUs: tapeloop info and a
// run's report say the threads it set and why; GOMAXPROCS, set by the
// user, still wins.
func TestThreadsFollowSLURM(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to see one thread chosen below them")
	}
	base := filterEnvPrefix(os.Environ(), "TAPELOOP_", "SLURM_", "GOMAXPROCS")
	runEnv := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Env = append(append([]string(nil), base...), env...)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("tapeloop %s with %v: %v: %s", strings.Join(args, " "), env, err, se.String())
		}
		return so.String()
	}
	threads := regexp.MustCompile(`(?m)^threads +(.*)$`)
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"SLURM_CPUS_PER_TASK=1"}, "1 (SLURM_CPUS_PER_TASK=1)"},
		{[]string{"SLURM_CPUS_PER_TASK=1", "GOMAXPROCS=2"}, "2 (GOMAXPROCS=2 in the environment)"},
		{nil, ""}, // the CPUs or the machine's own cgroup quota: not 1 because of SLURM
	} {
		m := threads.FindStringSubmatch(runEnv(c.env, "info"))
		switch {
		case m == nil:
			t.Errorf("%v: tapeloop info has no threads line", c.env)
		case c.want != "" && m[1] != c.want:
			t.Errorf("%v: threads %q, want %q", c.env, m[1], c.want)
		case c.want == "" && strings.Contains(m[1], "SLURM"):
			t.Errorf("without SLURM: threads %q", m[1])
		}
	}
	dir := t.TempDir()
	report := filepath.Join(dir, "r.json")
	runEnv([]string{"SLURM_CPUS_PER_TASK=1"}, "interp", "--points", "1000", "--quiet", "--report", report, "--out", filepath.Join(dir, "o.npy"))
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Platform struct {
			Threads int    `json:"threads"`
			Reason  string `json:"threads_reason"`
		} `json:"platform"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Platform.Threads != 1 || r.Platform.Reason != "SLURM_CPUS_PER_TASK=1" {
		t.Errorf("report: threads %d because %q", r.Platform.Threads, r.Platform.Reason)
	}
}
