package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/npy"
)

// sbatchScripts returns the job scripts of docs/cluster.md, each a fenced
// sh block that starts with #!/bin/bash and holds #SBATCH lines, by their
// --job-name.
func sbatchScripts(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cluster.md"))
	if err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)```sh\n(#!/bin/bash\n.*?)```").FindAllStringSubmatch(string(doc), -1) {
		name := regexp.MustCompile(`(?m)^#SBATCH --job-name=(\S+)`).FindStringSubmatch(m[1])
		if name == nil {
			t.Fatalf("docs/cluster.md: a job script without #SBATCH --job-name:\n%s", m[1])
		}
		scripts[name[1]] = m[1]
	}
	if len(scripts) != 3 {
		t.Fatalf("docs/cluster.md holds job scripts %v, want affinity, wavelet and drr", scripts)
	}
	return scripts
}

// substitute replaces in the script each old string (a path or a size of
// the doc's example) by its new one; each must be there, so that a script
// changed in the doc fails here instead of running something else.
func substitute(t *testing.T, name, script string, pairs ...string) string {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(script, pairs[i]) {
			t.Fatalf("docs/cluster.md's %s script no longer holds %q:\n%s", name, pairs[i], script)
		}
		script = strings.ReplaceAll(script, pairs[i], pairs[i+1])
	}
	return script
}

// slurmCluster is a one-node SLURM cluster of scripts/slurm-up.sh.
type slurmCluster struct {
	t    *testing.T
	dir  string   // its configuration, state and logs
	work string   // where jobs are submitted from and write
	env  []string // SLURM_CONF and a PATH with tapeloop first
	mode string   // "cgroup" or "accounting"
}

// startSlurm starts the cluster, or skips the test with one line saying
// why it cannot run here. The daemons are stopped when the test ends.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("the SLURM cluster test runs without -short (make test-full)")
	}
	if os.Geteuid() != 0 {
		t.Skip("SLURM test: needs root to start slurmd and munged")
	}
	for _, c := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "runuser"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("SLURM test: %s not installed (scripts/install-slurm.sh installs slurm-wlm and munge)", c)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// A short directory of its own: munged's socket path must be short.
	dir, err := os.MkdirTemp("", "tl-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // the munge user reaches its socket and key through it
	c := &slurmCluster{t: t, dir: filepath.Join(dir, "cluster"), work: filepath.Join(dir, "work")}
	os.MkdirAll(c.work, 0o755)
	up := func(cgroup string) error {
		cmd := exec.Command(filepath.Join(root, "scripts", "slurm-up.sh"), c.dir)
		cmd.Env = append(os.Environ(), "SLURM_CGROUP="+cgroup)
		out, err := cmd.CombinedOutput()
		t.Logf("%s", bytes.TrimSpace(out))
		return err
	}
	down := func() {
		if out, err := exec.Command(filepath.Join(root, "scripts", "slurm-down.sh"), c.dir).CombinedOutput(); err != nil {
			t.Logf("slurm-down: %v: %s", err, out)
		}
	}
	t.Cleanup(down)
	if err := up("1"); err != nil {
		// The cgroup plugins cannot work everywhere (a container without
		// a writable cgroup tree): --mem is then only accounted.
		t.Logf("SLURM with task/cgroup did not start (%v); falling back to --mem accounting without a kernel limit", err)
		down()
		os.RemoveAll(c.dir)
		if err := up("0"); err != nil {
			t.Skipf("SLURM test: the one-node cluster did not start here: %v", err)
		}
	}
	mode, _ := os.ReadFile(filepath.Join(c.dir, "mode"))
	c.mode = strings.TrimSpace(string(mode))
	c.env = append(filterEnv(os.Environ(), "SLURM_CONF", "PATH", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "JOB_COMPLETION_INDEX"),
		"SLURM_CONF="+filepath.Join(c.dir, "slurm.conf"), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
	return c
}

// run runs a SLURM command (or any) in the work directory.
func (c *slurmCluster) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = c.work, c.env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// submit writes script to file in the work directory and submits it with
// sbatch's extra args, returning the job number.
func (c *slurmCluster) submit(file, script string, args ...string) string {
	c.t.Helper()
	p := filepath.Join(c.work, file)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		c.t.Fatal(err)
	}
	out, err := c.run("sbatch", append(append([]string{"--parsable"}, args...), p)...)
	if err != nil {
		c.t.Fatalf("sbatch %v %s: %v: %s", args, file, err, out)
	}
	c.t.Logf("sbatch %s %s: job %s", strings.Join(args, " "), file, out)
	return out
}

// wait waits (at most limit) until job has no task left in the queue and
// returns each task's state by its task number ("" for a job that is not
// an array).
func (c *slurmCluster) wait(job string, limit time.Duration) map[string]string {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		out, err := c.run("squeue", "-h", "-j", job, "-o", "%i %T")
		if err == nil && out == "" {
			break
		}
		if time.Now().After(deadline) {
			c.run("scancel", job)
			c.t.Fatalf("job %s still queued after %v: %s", job, limit, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	out, err := c.run("scontrol", "-o", "show", "job", job)
	if err != nil {
		c.t.Fatalf("scontrol show job %s: %v: %s", job, err, out)
	}
	states := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		state := regexp.MustCompile(`JobState=(\S+)`).FindStringSubmatch(line)
		if state == nil {
			continue
		}
		task := ""
		if m := regexp.MustCompile(`ArrayTaskId=(\S+)`).FindStringSubmatch(line); m != nil {
			task = m[1]
		}
		states[task] = state[1]
	}
	c.t.Logf("job %s ended: %v", job, states)
	return states
}

// log is the output file of a task.
func (c *slurmCluster) log(job, task string) string {
	b, _ := os.ReadFile(filepath.Join(c.work, fmt.Sprintf("slurm-%s_%s.out", job, task)))
	return strings.TrimSpace(string(b))
}

// allCompleted fails unless every task of states completed.
func (c *slurmCluster) allCompleted(job string, states map[string]string, n int) {
	c.t.Helper()
	if len(states) != n {
		c.t.Errorf("job %s: %d tasks %v, want %d", job, len(states), states, n)
	}
	for task, s := range states {
		if s != "COMPLETED" {
			c.t.Errorf("job %s task %s: %s: %s", job, task, s, c.log(job, task))
		}
	}
}

// mustRunTapeloop runs tapeloop with args and fails the test unless it succeeds.
func mustRunTapeloop(t *testing.T, args ...string) {
	t.Helper()
	if _, se, code := run(t, args...); code != 0 {
		t.Fatalf("tapeloop %v: exit %d: %s", args, code, se)
	}
}

// globShards lists dir's shard files.
func globShards(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "shard_*.npz"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSlurmArrays runs the three job scripts of docs/cluster.md, taken
// from the doc as they are written (only paths and sizes replaced), on a
// real one-node SLURM cluster, and merges each array into the bytes one
// process writes: the affinity array with two tasks failed and
// resubmitted (sbatch --array=1,3) and merged by a job that waits with
// --dependency=afterany and checks the set first; the wavelet array under
// --mem (a cgroup memory limit where the cluster has cgroups); the DRR
// array with one task stopped by SLURM's signal as at its time limit, then
// resubmitted and resumed from its checkpoint.
func TestSlurmArrays(t *testing.T) {
	scripts := sbatchScripts(t)
	c := startSlurm(t)
	t.Logf("SLURM cluster up (%s)", c.mode)
	in := filepath.Join(c.work, "in")
	os.MkdirAll(in, 0o755)

	t.Run("affinity with failed tasks resubmitted", func(t *testing.T) {
		c.t = t
		images := filepath.Join(in, "stack_f32.npy")
		vals := make([]float64, 60*6*5)
		for i := range vals {
			vals[i] = float64((i*37)%101) / 101
		}
		os.WriteFile(images, npyOf(npy.Float32, []int{60, 6, 5}, vals), 0o644)
		out := filepath.Join(c.work, "nn")
		os.MkdirAll(out, 0o755)
		script := substitute(t, "affinity", scripts["affinity"],
			"--array=0-999%100", "--array=0-3",
			"--cpus-per-task=16", "--cpus-per-task=1",
			"--mem=16G", "--mem=500M",
			"/data/stack_f32.npy", images,
			"--shards 1000", "--shards 4",
			"--mem-limit 8GiB", "--mem-limit 256MiB",
			"/scratch/nn", out)
		whole := filepath.Join(c.work, "nn-whole.npz")
		mustRunTapeloop(t, "affinity", "--images", images, "--metric", "cosine", "--topk", "10", "--quiet", "--out", whole)
		// Tasks 1 and 3 fail: a directory stands where their shards go.
		for _, i := range []int{1, 3} {
			os.Mkdir(filepath.Join(out, fmt.Sprintf("shard_%d.npz", i)), 0o755)
		}
		job := c.submit("affinity.sh", script)
		states := c.wait(job, 90*time.Second)
		for task, want := range map[string]string{"0": "COMPLETED", "1": "FAILED", "2": "COMPLETED", "3": "FAILED"} {
			if states[task] != want {
				t.Errorf("task %s: %s, want %s: %s", task, states[task], want, c.log(job, task))
			}
		}
		t.Logf("task 1's log: %s", c.log(job, "1"))
		for _, i := range []int{1, 3} {
			os.Remove(filepath.Join(out, fmt.Sprintf("shard_%d.npz", i)))
		}
		so, _, code := run(t, append([]string{"merge", "--check"}, globShards(t, out)...)...)
		t.Logf("merge --check after the array:\n%s", so)
		if code != 1 || !strings.Contains(so, "resubmit: --array=1,3") {
			t.Fatalf("merge --check: exit %d, want 1 and --array=1,3:\n%s", code, so)
		}
		again := c.submit("affinity.sh", script, "--array=1,3")
		c.allCompleted(again, c.wait(again, 90*time.Second), 2)
		// The merge job of the doc: after the resubmission, whatever its
		// tasks' fate, checking the set first.
		merged := filepath.Join(c.work, "nn.npz")
		mj := c.submit("merge.sh", fmt.Sprintf("#!/bin/bash\ntapeloop merge --check %s/shard_*.npz && tapeloop merge --out %s %s/shard_*.npz\n", out, merged, out),
			"--dependency=afterany:"+again, "--output=merge-%j.out")
		c.wait(mj, 60*time.Second)
		mlog, _ := os.ReadFile(filepath.Join(c.work, "merge-"+mj+".out"))
		t.Logf("merge job's log:\n%s", bytes.TrimSpace(mlog))
		sameFile(t, whole, merged)
	})

	t.Run("wavelet under --mem", func(t *testing.T) {
		c.t = t
		vol := filepath.Join(in, "vol.npy")
		vals := make([]float64, 24*20*16)
		for i := range vals {
			vals[i] = float64((i*13)%97) / 97
		}
		writeNpy(t, vol, []int{24, 20, 16}, vals)
		out := filepath.Join(c.work, "wavelet")
		os.MkdirAll(out, 0o755)
		grid := []string{"--theta", "0:pi:4", "--phi", "0:pi:3", "--xi", "1:3:2"}
		script := substitute(t, "wavelet", scripts["wavelet"],
			"--array=0-199%50", "--array=0-3",
			"--cpus-per-task=16", "--cpus-per-task=1",
			"--mem=48G", "--mem=600M",
			"/data/vol_800x800x200.npy", vol,
			"--theta 0:pi:100 --phi 0:pi:100 --xi 1:21:20", strings.Join(grid, " "),
			"--shards 200", "--shards 4",
			"--mem-limit 32GiB", "--mem-limit 256MiB",
			"/scratch/wavelet", out)
		// The memory the job sees: under cgroups, tapeloop info reads the
		// job's limit from its control group.
		info := c.submit("info.sh", "#!/bin/bash\ntapeloop info\n", "--mem=600M", "--output=info-%j.out")
		c.wait(info, 60*time.Second)
		ib, _ := os.ReadFile(filepath.Join(c.work, "info-"+info+".out"))
		var memLines []string
		for _, l := range strings.Split(string(ib), "\n") {
			if strings.Contains(l, "memory") || strings.Contains(l, "mem-limit") {
				memLines = append(memLines, l)
			}
		}
		t.Logf("tapeloop info in a --mem=600M job: %s", strings.Join(memLines, " | "))
		if c.mode == "cgroup" && !strings.Contains(string(ib), "600 MiB") {
			t.Errorf("under task/cgroup, tapeloop info in a --mem=600M job does not report the 600 MiB limit:\n%s", ib)
		}
		if c.mode != "cgroup" {
			t.Log("no cgroup limit on this cluster: --mem is only accounted by SLURM here")
		}
		whole := filepath.Join(c.work, "sweep-whole.csv")
		mustRunTapeloop(t, append([]string{"wavelet", "--volume", vol, "--boundary", "reflect", "--quiet", "--out", whole}, grid...)...)
		job := c.submit("wavelet.sh", script)
		c.allCompleted(job, c.wait(job, 120*time.Second), 4)
		merged := filepath.Join(c.work, "sweep.csv")
		mustRunTapeloop(t, append([]string{"merge", "--out", merged}, globShards(t, out)...)...)
		sameFile(t, whole, merged)
	})

	t.Run("drr stopped and resumed", func(t *testing.T) {
		c.t = t
		const n = 64
		vol := filepath.Join(in, "ct.npy")
		vals := make([]float64, n*n*n)
		for i := range vals {
			x, y, z := i%n-n/2, (i/n)%n-n/2, i/(n*n)-n/2
			if x*x+y*y+z*z < (n/3)*(n/3) {
				vals[i] = float64(200 + (i*7)%300)
			} else {
				vals[i] = -1000
			}
		}
		writeNpy(t, vol, []int{n, n, n}, vals)
		out := filepath.Join(c.work, "drr")
		os.MkdirAll(out, 0o755)
		script := substitute(t, "drr", scripts["drr"],
			"--array=0-99%25", "--array=0-3",
			"--cpus-per-task=16", "--cpus-per-task=1",
			"--mem=8G", "--mem=600M",
			"/data/ct.nii.gz", vol,
			"--orbit 1000000", "--orbit 1600",
			"--detector 200x200", "--detector 160x160",
			"--shards 100", "--shards 4",
			"--mem-limit 4GiB", "--mem-limit 64MiB",
			"/scratch/drr", out)
		whole := filepath.Join(c.work, "drr-whole")
		mustRunTapeloop(t, "drr", "--volume", vol, "--hu", "--orbit", "1600", "--detector", "160x160", "--pixel", "2", "--mem-limit", "64MiB", "--quiet", "--out", whole)
		job := c.submit("drr.sh", script)
		// Task 2 is stopped as SLURM stops a task at its time limit
		// (SIGTERM to every process of the task) once it has saved some
		// images.
		ckpt := filepath.Join(out, "shard_2.npz.ckpt")
		deadline := time.Now().Add(90 * time.Second)
		for {
			if k, err := checkpoint.Count(ckpt); err == nil && k > 0 {
				break
			}
			if _, err := os.Stat(filepath.Join(out, "shard_2.npz")); err == nil || time.Now().After(deadline) {
				t.Fatalf("task 2 finished or never checkpointed before it could be stopped: make the DRR run longer")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if o, err := c.run("scancel", "--signal=TERM", "--full", job+"_2"); err != nil {
			t.Fatalf("scancel: %v: %s", err, o)
		}
		states := c.wait(job, 120*time.Second)
		if states["2"] != "FAILED" {
			t.Errorf("task 2 after SIGTERM: %s, want FAILED", states["2"])
		}
		t.Logf("task 2's log after SIGTERM: %s", c.log(job, "2"))
		saved, err := checkpoint.Count(ckpt)
		if err != nil || saved == 0 {
			t.Fatalf("task 2 left no checkpoint with records: %d, %v", saved, err)
		}
		t.Logf("task 2's checkpoint holds %d poses", saved)
		so, _, code := run(t, append([]string{"merge", "--check"}, globShards(t, out)...)...)
		if code != 1 || !strings.Contains(so, "resubmit: --array=2") {
			t.Errorf("merge --check: exit %d, want 1 and --array=2:\n%s", code, so)
		}
		again := c.submit("drr.sh", script, "--array=2")
		c.allCompleted(again, c.wait(again, 120*time.Second), 1)
		if _, err := os.Stat(ckpt); err == nil {
			t.Error("the resumed task left its checkpoint")
		}
		merged := filepath.Join(c.work, "drr-merged")
		mustRunTapeloop(t, append([]string{"merge", "--out", merged}, globShards(t, out)...)...)
		sameTree(t, whole, merged)
	})
}
