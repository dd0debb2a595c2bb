package cpus

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tree writes files (path relative to a new directory: contents) and
// returns the directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestDecide(t *testing.T) {
	v2 := map[string]string{"slurm/cpu.max": "max 100000\n", "slurm/job/cpu.max": "150000 100000\n"}
	v2tight := map[string]string{"slurm/cpu.max": "100000 100000\n", "slurm/job/cpu.max": "400000 100000\n"}
	v1 := map[string]string{"cpu,cpuacct/batch/cpu.cfs_quota_us": "300000\n", "cpu,cpuacct/batch/cpu.cfs_period_us": "100000\n",
		"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}
	cases := []struct {
		name    string
		mask    int
		env     func(string) string
		files   map[string]string
		self    string
		threads int
		reason  string // a part of the reason
	}{
		{"the mask alone", 8, env(), nil, "", 8, "the 8 CPUs this process may run on"},
		{"SLURM below the mask (TaskPlugin=task/none)", 64, env("SLURM_CPUS_PER_TASK", "1"), nil, "", 1, "SLURM_CPUS_PER_TASK=1"},
		{"SLURM above the mask", 2, env("SLURM_CPUS_PER_TASK", "16"), nil, "", 2, "the 2 CPUs"},
		{"SLURM garbage is ignored", 4, env("SLURM_CPUS_PER_TASK", "two"), nil, "", 4, "the 4 CPUs"},
		{"SLURM zero is ignored", 4, env("SLURM_CPUS_PER_TASK", "0"), nil, "", 4, "the 4 CPUs"},
		{"v2 cpu.max 1.5 CPUs rounds up", 8, env(), v2, "0::/slurm/job\n", 2, "cgroup cpu.max 150000 100000 of "},
		{"v2 a parent's quota is tighter", 8, env(), v2tight, "0::/slurm/job\n", 1, "cgroup cpu.max 100000 100000 of "},
		{"v2 quota above the mask", 1, env(), v2, "0::/slurm/job\n", 1, "the 1 CPU this process may run on"},
		{"v2 max is no quota", 8, env(), map[string]string{"job/cpu.max": "max 100000\n"}, "0::/job\n", 8, "the 8 CPUs"},
		{"v1 cfs quota", 8, env(), v1, "5:cpu,cpuacct:/batch\n0::/\n", 3, "cgroup cpu.cfs_quota_us 300000 / cpu.cfs_period_us 100000 of "},
		{"v1 -1 is no quota", 8, env(), v1, "5:cpu,cpuacct:/\n", 8, "the 8 CPUs"},
		{"SLURM and a tighter quota", 8, env("SLURM_CPUS_PER_TASK", "4"), v2tight, "0::/slurm/job\n", 1, "cgroup cpu.max"},
		{"SLURM tighter than the quota", 8, env("SLURM_CPUS_PER_TASK", "1"), v2, "0::/slurm/job\n", 1, "SLURM_CPUS_PER_TASK=1"},
		{"GOMAXPROCS wins over SLURM and the quota", 8, env("GOMAXPROCS", "6", "SLURM_CPUS_PER_TASK", "1"), v2tight, "0::/slurm/job\n", 6, "GOMAXPROCS=6 in the environment"},
		{"GOMAXPROCS garbage is ignored", 8, env("GOMAXPROCS", "many", "SLURM_CPUS_PER_TASK", "2"), nil, "", 2, "SLURM_CPUS_PER_TASK=2"},
		{"garbage in cpu.max", 8, env(), map[string]string{"job/cpu.max": "lots\n"}, "0::/job\n", 8, "the 8 CPUs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Sources{Mask: c.mask, Getenv: c.env, Self: []byte(c.self)}
			if c.files != nil {
				s.CgroupRoot = tree(t, c.files)
			}
			got := Decide(s)
			if got.Threads != c.threads || !strings.Contains(got.Reason, c.reason) {
				t.Errorf("Decide = %v, want %d threads because %q", got, c.threads, c.reason)
			}
		})
	}
}

// TestApply sets GOMAXPROCS to the decision and keeps it for reports.
func TestApply(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "3")
	c := Apply()
	if c.Threads != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("Apply = %v, GOMAXPROCS %d", c, runtime.GOMAXPROCS(0))
	}
	if a, ok := Applied(); !ok || a != c || a.String() != "3 (GOMAXPROCS=3 in the environment)" {
		t.Errorf("Applied = %v, %v", a, ok)
	}
}
