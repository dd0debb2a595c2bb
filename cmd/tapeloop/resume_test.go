package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/checkpoint"
)

// resumeWavelet is a sweep of a few seconds on 2 cores, in batches of two,
// with kernels shared (ξ = 1: one round kernel) and reflect padding.
var resumeWavelet = []string{"wavelet", "--size", "64x64x64", "--a", "2", "--theta", "0:pi:24", "--phi", "0:pi:10",
	"--xi", "1,1.5,3", "--batch", "2", "--quiet"}

// resumeDRR renders poses for a few seconds, two per batch, with PNGs.
var resumeDRR = []string{"drr", "--size", "128", "--orbit", "120", "--detector", "192x192", "--pixel", "2",
	"--method", "trilinear", "--batch", "2", "--png", "--quiet"}

// interrupt starts tapeloop with args, waits until the checkpoint ckpt
// holds more than after records, sends sig and returns the process's exit
// error, its stderr and the records then in the checkpoint.
func interrupt(t *testing.T, args []string, ckpt string, after int, sig syscall.Signal) (error, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(hangAfter)
	for {
		if n, err := checkpoint.Count(ckpt); err == nil && n > after {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("%v ended (%v) before its checkpoint held %d records: %s", args, err, after+1, se.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("%v: hung: no checkpoint record after %v", args, hangAfter)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cmd.Process.Signal(sig)
	var err error
	select {
	case err = <-done:
	case <-time.After(hangAfter):
		cmd.Process.Kill()
		t.Fatalf("%v: hung: still running %v after %v", args, hangAfter, sig)
	}
	n, cerr := checkpoint.Count(ckpt)
	if cerr != nil {
		t.Fatalf("after %v: %v", sig, cerr)
	}
	return err, se.String(), n
}

// with is args with flag's value replaced by v.
func with(args []string, flag, v string) []string {
	out := append([]string{}, args...)
	for i := range out[:len(out)-1] {
		if out[i] == flag {
			out[i+1] = v
		}
	}
	return out
}

// dotFiles lists the hidden files in dir: temporary files.
func dotFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

// sameTree fails unless every file of want's directory is in got's with
// the same bytes, and got holds nothing else.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	we, _ := os.ReadDir(want)
	ge, _ := os.ReadDir(got)
	if len(we) != len(ge) {
		t.Errorf("%s holds %d entries, %s %d", got, len(ge), want, len(we))
	}
	for _, e := range we {
		sameFile(t, filepath.Join(want, e.Name()), filepath.Join(got, e.Name()))
	}
}

func sameFile(t *testing.T, want, got string) {
	t.Helper()
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !bytes.Equal(w, g) {
		t.Errorf("%s differs from the uninterrupted run's %s", got, want)
	}
}

// killed checks that err is a SIGKILL's.
func killed(t *testing.T, err error, stderr string) {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("want death by SIGKILL, got %v: %s", err, stderr)
	}
}

// stoppedForResume checks that a run stopped by SIGTERM exited with status
// 1 and one line saying how much is saved and to rerun with --resume.
func stoppedForResume(t *testing.T, err error, stderr string) {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v after SIGTERM, want status 1: %s", err, stderr)
	}
	msg := strings.TrimSpace(stderr)
	if strings.Contains(msg, "\n") || !strings.Contains(msg, " done, saved in ") || !strings.Contains(msg, "rerun the same command with --resume") {
		t.Errorf("stderr %q, want one line saying what is saved and to rerun with --resume", msg)
	}
	t.Logf("after SIGTERM: %s", msg)
}

// TestWaveletResume kills a sweep (SIGKILL) once it has checkpointed,
// checks what is refused then, resumes and kills the resumed run too, cuts
// the checkpoint's last record short, resumes and stops that run with
// SIGTERM, and resumes to the end: the CSV must be the uninterrupted
// run's, byte for byte, with no checkpoint or temporary file left.
func TestWaveletResume(t *testing.T) {
	dir := t.TempDir()
	ref, out := filepath.Join(dir, "ref.csv"), filepath.Join(dir, "out.csv")
	ckpt := out + ".ckpt"
	if _, se, code := run(t, append(resumeWavelet, "--out", ref)...); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, se)
	}
	args := append(resumeWavelet, "--out", out)
	resume := append(args, "--resume")

	err, se, n := interrupt(t, args, ckpt, 0, syscall.SIGKILL)
	killed(t, err, se)
	if len(dotFiles(t, dir)) == 0 {
		t.Error("the killed run left no temporary file: the sweep of stale ones goes untested")
	}
	saved, _ := os.ReadFile(ckpt)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"without --resume", args, "continue it with --resume, or remove it to start over"},
		// Without --resume, a checkpoint of another run is not offered
		// to --resume, which would refuse it.
		{"another --xi, without --resume", with(args, "--xi", "1,1.5,2.5"), "of another wavelet run (other inputs, flags or shard), which this one cannot continue: remove it"},
		{"another --xi", with(resume, "--xi", "1,1.5,2.5"), "from a different run"},
		{"another --seed", append(append([]string{}, resume...), "--seed", "2"), "from a different run"},
	} {
		_, se, code := run(t, c.args...)
		if code != 1 || strings.Count(strings.TrimSpace(se), "\n") != 0 || !strings.Contains(se, c.want) || !strings.Contains(se, ckpt) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and one line naming %s and saying %q", c.name, code, se, ckpt, c.want)
		}
		if b, _ := os.ReadFile(ckpt); !bytes.Equal(b, saved) {
			t.Errorf("%s: the checkpoint changed", c.name)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: wrote %s", c.name, out)
		}
	}

	err, se, n = interrupt(t, resume, ckpt, n, syscall.SIGKILL)
	killed(t, err, se)
	fi, _ := os.Stat(ckpt)
	if err := os.Truncate(ckpt, fi.Size()-5); err != nil { // a torn last record
		t.Fatal(err)
	}
	err, se, _ = interrupt(t, resume, ckpt, n, syscall.SIGTERM) // n counts the torn record
	stoppedForResume(t, err, se)

	if _, se, code := run(t, resume...); code != 0 {
		t.Fatalf("last --resume: exit %d: %s", code, se)
	}
	sameFile(t, ref, out)
	if _, err := os.Stat(ckpt); err == nil {
		t.Error("the checkpoint is still there after the run finished")
	}
	if d := dotFiles(t, dir); len(d) != 0 {
		t.Errorf("temporary files left: %v", d)
	}
}

// TestDRRResume kills a DRR run with PNGs twice, cuts the checkpoint's
// last record short, and resumes to the end: drr.npy and every PNG must be
// the uninterrupted run's, byte for byte.
func TestDRRResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds: make test-full runs it (TestWaveletResume is the fast case)")
	}
	dir := t.TempDir()
	ref, out := filepath.Join(dir, "ref"), filepath.Join(dir, "out")
	ckpt := filepath.Join(out, "drr.npy.ckpt")
	if _, se, code := run(t, append(resumeDRR, "--out", ref)...); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, se)
	}
	args := append(resumeDRR, "--out", out)
	resume := append(args, "--resume")
	err, se, n := interrupt(t, args, ckpt, 0, syscall.SIGKILL)
	killed(t, err, se)
	err, se, _ = interrupt(t, resume, ckpt, n, syscall.SIGKILL)
	killed(t, err, se)
	fi, _ := os.Stat(ckpt)
	if err := os.Truncate(ckpt, fi.Size()-1000); err != nil {
		t.Fatal(err)
	}
	if _, se, code := run(t, resume...); code != 0 {
		t.Fatalf("last --resume: exit %d: %s", code, se)
	}
	sameTree(t, ref, out)
}

// TestResumeWithoutCheckpoint: --resume with nothing to resume is one line,
// exit 1, and writes nothing.
func TestResumeWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"wavelet", "--size", "8x8x8", "--out", filepath.Join(dir, "w.csv"), "--resume"}, "--resume: no checkpoint at " + filepath.Join(dir, "w.csv.ckpt")},
		{[]string{"drr", "--size", "16", "--orbit", "2", "--detector", "8x8", "--out", filepath.Join(dir, "d"), "--resume"}, "--resume: no checkpoint at " + filepath.Join(dir, "d", "drr.npy.ckpt")},
		{[]string{"wavelet", "--size", "8x8x8", "--resume"}, "--resume: it needs --out"},
	} {
		_, se, code := run(t, c.args...)
		if code != 1 || strings.Count(strings.TrimSpace(se), "\n") != 0 || !strings.Contains(se, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line saying %q", c.args, code, se, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

// TestResumeCheckpointOfAnotherShard: shard 3 of 8 killed leaves
// shard_3.npz.ckpt; a run of another shard on that output (shard 0, as a
// resubmitted task that took its shard from the array's first task would
// compute) is refused, with and without --resume, in one line that says the
// checkpoint is another shard's work to keep, not to remove, and how to
// resubmit failed tasks; the checkpoint stays as it was, and shard 3 then
// resumes from it.
func TestResumeCheckpointOfAnotherShard(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "shard_3.npz")
	ckpt := out + ".ckpt"
	shard3 := append(append([]string{}, resumeWavelet...), "--shard", "3/8", "--out", out)
	err, se, _ := interrupt(t, shard3, ckpt, 0, syscall.SIGKILL)
	killed(t, err, se)
	saved, _ := os.ReadFile(ckpt)
	shard0 := with(shard3, "--shard", "0/8")
	for _, args := range [][]string{shard0, append(shard0, "--resume")} {
		_, se, code := run(t, args...)
		msg := strings.TrimSpace(se)
		t.Logf("%s", msg)
		if code != 1 || strings.Contains(msg, "\n") || strings.Contains(msg, "remove it") {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line that does not say to remove it", args, code, se)
		}
		for _, want := range []string{ckpt, "another shard", "keep it for that shard", "--array=3,7"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: %q does not say %q", args, msg, want)
			}
		}
		if b, _ := os.ReadFile(ckpt); !bytes.Equal(b, saved) {
			t.Errorf("%v: the checkpoint changed", args)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: wrote %s", args, out)
		}
	}
	if _, se, code := run(t, append(shard3, "--resume")...); code != 0 {
		t.Fatalf("shard 3 resumed: exit %d: %s", code, se)
	}
	ref := filepath.Join(dir, "ref.npz")
	if _, se, code := run(t, with(shard3, "--out", ref)...); code != 0 {
		t.Fatalf("shard 3 uninterrupted: exit %d: %s", code, se)
	}
	so, se, code := run(t, "merge", "--check", out)
	if code != 1 || !strings.Contains(so, "--array=0-2,4-7") {
		t.Errorf("merge --check of shard 3 alone: exit %d, want 1 and --array=0-2,4-7: %s%s", code, so, se)
	}
	sameFile(t, ref, out)
}
