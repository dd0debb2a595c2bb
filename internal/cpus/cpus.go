// Package cpus decides how many threads tapeloop's parallel loops run on
// (GOMAXPROCS: every loop of the ops and the C kernels they call is split
// over that many goroutines): the CPUs the process may run on, lowered to
// what its batch system grants it (SLURM_CPUS_PER_TASK) and to its
// cgroup's CPU quota, unless GOMAXPROCS is set in the environment.
package cpus

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Choice is the thread count decided, and why.
type Choice struct {
	// Threads is the number of threads the loops run on.
	Threads int
	// Reason says what decided it, as a user sets or reads it:
	// "SLURM_CPUS_PER_TASK=1", "cgroup cpu.max 150000 100000 of
	// /sys/fs/cgroup/job", "GOMAXPROCS=3 in the environment", "the 8 CPUs
	// this process may run on".
	Reason string
}

// String is "1 (SLURM_CPUS_PER_TASK=1)".
func (c Choice) String() string { return fmt.Sprintf("%d (%s)", c.Threads, c.Reason) }

// Sources are what Decide reads: the system's (System) or a test's.
type Sources struct {
	// Mask is the number of CPUs in the process's affinity mask
	// (sched_getaffinity).
	Mask int
	// Getenv reads the environment (GOMAXPROCS, SLURM_CPUS_PER_TASK).
	Getenv func(string) string
	// CgroupRoot is where the cgroup file systems are mounted
	// (/sys/fs/cgroup) and Self the contents of /proc/self/cgroup.
	CgroupRoot string
	Self       []byte
}

// System is this process's sources.
func System() Sources {
	self, _ := os.ReadFile("/proc/self/cgroup")
	return Sources{Mask: runtime.NumCPU(), Getenv: os.Getenv, CgroupRoot: "/sys/fs/cgroup", Self: self}
}

// Decide picks the thread count: GOMAXPROCS from the environment when set
// to a positive integer (the user's choice wins); else the least of the
// CPUs in the mask, SLURM_CPUS_PER_TASK and the cgroup's CPU quota
// (rounded up to whole CPUs), the first of them in that order on a tie.
// Under SLURM with TaskPlugin=task/none neither the mask nor a cgroup
// holds a task to its --cpus-per-task: only the variable says it.
func Decide(s Sources) Choice {
	getenv := s.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if v := strings.TrimSpace(getenv("GOMAXPROCS")); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return Choice{n, fmt.Sprintf("GOMAXPROCS=%d in the environment", n)}
		}
	}
	mask := max(s.Mask, 1)
	c := Choice{mask, fmt.Sprintf("the %d CPUs this process may run on", mask)}
	if mask == 1 {
		c.Reason = "the 1 CPU this process may run on"
	}
	if v := strings.TrimSpace(getenv("SLURM_CPUS_PER_TASK")); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 && n < c.Threads {
			c = Choice{n, "SLURM_CPUS_PER_TASK=" + v}
		}
	}
	if q, why, ok := cgroupQuota(s.CgroupRoot, s.Self); ok {
		if n := int(max(1, math.Ceil(q))); n < c.Threads {
			c = Choice{n, why}
		}
	}
	return c
}

// cgroupQuota is the CPU quota, in CPUs, of the process's cgroup and the
// groups above it, the tightest: cgroup v2's cpu.max ("max" or
// "quota period"), v1's cpu.cfs_quota_us / cpu.cfs_period_us (−1: none).
// why names the file and its values.
func cgroupQuota(root string, self []byte) (cpus float64, why string, ok bool) {
	if root == "" {
		return 0, "", false
	}
	v2, v1, hasV1 := sysmem.CgroupPaths(self, "cpu")
	read := func(dir string) (float64, string, bool) {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
		if err != nil {
			return 0, "", false
		}
		f := strings.Fields(string(b))
		if len(f) != 2 || f[0] == "max" {
			return 0, "", false
		}
		q, err1 := strconv.ParseFloat(f[0], 64)
		p, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
			return 0, "", false
		}
		return q / p, fmt.Sprintf("cgroup cpu.max %s %s of %s", f[0], f[1], dir), true
	}
	if q, why, ok := walk(root, v2, read); ok {
		return q, why, true
	}
	if !hasV1 {
		return 0, "", false
	}
	readV1 := func(dir string) (float64, string, bool) {
		qb, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
		pb, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
		if err1 != nil || err2 != nil {
			return 0, "", false
		}
		q, err1 := strconv.ParseFloat(strings.TrimSpace(string(qb)), 64)
		p, err2 := strconv.ParseFloat(strings.TrimSpace(string(pb)), 64)
		if err1 != nil || err2 != nil || q <= 0 || p <= 0 { // −1: no quota
			return 0, "", false
		}
		return q / p, fmt.Sprintf("cgroup cpu.cfs_quota_us %s / cpu.cfs_period_us %s of %s",
			strings.TrimSpace(string(qb)), strings.TrimSpace(string(pb)), dir), true
	}
	for _, mount := range []string{"cpu,cpuacct", "cpu", "cpuacct,cpu"} {
		if st, err := os.Stat(filepath.Join(root, mount)); err == nil && st.IsDir() {
			return walk(filepath.Join(root, mount), v1, readV1)
		}
	}
	return 0, "", false
}

// walk reads the quota of the group rel under mount and of each group
// above it, up to mount, and returns the tightest. Where the group is not
// found under mount (a container that shows the host's path), mount's own
// files are the group's.
func walk(mount, rel string, read func(dir string) (float64, string, bool)) (float64, string, bool) {
	dir := filepath.Join(mount, filepath.Clean("/"+rel))
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = mount
	}
	var best float64
	var why string
	found := false
	for {
		if q, w, ok := read(dir); ok && (!found || q < best) {
			best, why, found = q, w, true
		}
		if dir == mount || len(dir) <= len(mount) {
			break
		}
		dir = filepath.Dir(dir)
	}
	return best, why, found
}

var applied struct {
	sync.Mutex
	c   Choice
	set bool
}

// Apply decides the thread count for this process (Decide on System)
// and sets GOMAXPROCS to it; Current then reports it. Call it once, at
// start-up, before any work.
func Apply() Choice {
	c := Decide(System())
	runtime.GOMAXPROCS(c.Threads)
	applied.Lock()
	applied.c, applied.set = c, true
	applied.Unlock()
	return c
}

// Applied is the choice Apply made, false when it was not called.
func Applied() (Choice, bool) {
	applied.Lock()
	defer applied.Unlock()
	return applied.c, applied.set
}
