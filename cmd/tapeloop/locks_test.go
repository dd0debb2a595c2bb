package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tinySweep is a wavelet run that takes a moment.
var tinySweep = []string{"wavelet", "--quiet", "--size", "8x8x8", "--theta", "0", "--phi", "0", "--xi", "1"}

// TestSideFileLinksNotFollowed: a lock file or checkpoint beside --out
// that is a symbolic link to a file of the user's is refused in one line
// naming it, and the file it leads to is left as it was.
func TestSideFileLinksNotFollowed(t *testing.T) {
	for _, side := range []string{".lock", ".ckpt"} {
		dir := t.TempDir()
		victim := filepath.Join(dir, "victim.txt")
		if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "ql.csv")
		if err := os.Symlink("victim.txt", out+side); err != nil {
			t.Fatal(err)
		}
		args := append(tinySweep, "--out", out)
		_, se, code := run(t, args...)
		failsWithOneLine(t, args, se, code, out+side, "is a symbolic link")
		if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
			t.Errorf("%s: victim.txt holds %q", side, b)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: --out written", side)
		}
	}
}

// TestOutputIsAnotherOutputsSideFile: --report named as the checkpoint or
// lock file of --out is refused before any work, in one line naming both
// flags, and nothing is written.
func TestOutputIsAnotherOutputsSideFile(t *testing.T) {
	for _, side := range []string{".ckpt", ".lock"} {
		dir := t.TempDir()
		out := filepath.Join(dir, "q.csv")
		args := append(tinySweep, "--out", out, "--report", out+side)
		_, se, code := run(t, args...)
		failsWithOneLine(t, args, se, code, "--report "+out+side, "--out "+out)
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: left %v", side, entries)
		}
	}
}

// waitFile waits until path exists and is not empty, failing the test if
// the run ends first or it hangs (hangAfter).
func waitFile(t *testing.T, path string, done chan error, se fmt.Stringer) {
	t.Helper()
	for deadline := time.Now().Add(hangAfter); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(path); len(b) > 0 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before %s appeared: %s", err, path, se)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("hung: no %s after %v", path, hangAfter)
		}
	}
}

// TestMergeTakesTheOutputLock: merge into an output that a run is writing
// (a DRR directory, a wavelet CSV) is refused at once with the run's own
// message, naming its pid, and leaves the run's files alone.
func TestMergeTakesTheOutputLock(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	drrShard := runShards(t, dir, "drr", 1, "drr", "--quiet", "--size", "16", "--orbit", "2", "--detector", "5x7")
	waveShard := runShards(t, dir, "wave", 1, tinySweep...)
	for _, c := range []struct {
		name, out, lock string
		run             []string
		shard           string
	}{
		{"drr", p("rc2"), p("rc2/drr.npy.lock"), []string{"drr", "--size", "200", "--orbit", "1", "--detector", "1024x1024", "--pixel", "0.3",
			"--method", "trilinear", "--step", "0.005", "--quiet"}, drrShard[0]},
		{"wavelet", p("sweep.csv"), p("sweep.csv.lock"), []string{"wavelet", "--quiet", "--size", "64x64x64", "--theta", "0:pi:40", "--phi", "0:pi:40", "--xi", "1:8:8"}, waveShard[0]},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, se, done := startRun(t, append(c.run, "--out", c.out))
			defer func() {
				cmd.Process.Kill()
				<-done
			}()
			waitFile(t, c.lock, done, se)
			args := []string{"merge", "--out", c.out, c.shard}
			_, msg, code := run(t, args...)
			failsWithOneLine(t, args, msg, code, fmt.Sprintf("another tapeloop run is writing this output (pid %d", cmd.Process.Pid), c.lock)
			if b, _ := os.ReadFile(c.lock); !strings.HasPrefix(string(b), fmt.Sprint(cmd.Process.Pid, " ")) {
				t.Errorf("the run's lock file holds %q after the merge", b)
			}
			cmd.Process.Signal(syscall.SIGTERM)
		})
	}
}

// TestSignalDuringMerge stops merges of DRR shards with PNGs (thousands of
// small files made one after another) by SIGTERM at moments through the
// PNGs: each must end with exit status 1 and one line saying nothing was
// written, and leave no --out directory.
func TestSignalDuringMerge(t *testing.T) {
	dir := t.TempDir()
	shards := runShards(t, dir, "s", 2, "drr", "--quiet", "--size", "16", "--orbit", "3000", "--detector", "32x32", "--png")
	for _, after := range []time.Duration{600 * time.Millisecond, 900 * time.Millisecond, 1200 * time.Millisecond} {
		out := filepath.Join(dir, "merged")
		cmd, se, done := startRun(t, append([]string{"merge", "--out", out}, shards...))
		time.Sleep(after)
		cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-done:
		case <-time.After(hangAfter):
			cmd.Process.Kill()
			t.Fatalf("hung: still running %v after SIGTERM", hangAfter)
		}
		msg := strings.TrimSpace(se.String())
		if err == nil {
			t.Logf("after %v: the merge had finished", after)
			os.RemoveAll(out)
			continue
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "stopped by SIGTERM; nothing was written") {
			t.Errorf("after %v: exit %v, stderr %q; want status 1 and one line saying nothing was written", after, err, msg)
		}
		if entries, err := os.ReadDir(out); err == nil {
			t.Errorf("after %v: left %s with %d files in it", after, out, len(entries))
			os.RemoveAll(out)
		}
	}
}

// TestSIGHUP: SIGHUP (a closed terminal or ssh session) stops a run as
// SIGTERM does: exit status 1, one line, the checkpoint kept, no temporary
// file and no lock left; an affinity run leaves nothing. A run started
// under nohup (SIGHUP ignored) ignores it and finishes.
func TestSIGHUP(t *testing.T) {
	// Under a parent that ignores SIGHUP (nohup, a batch script's
	// background job), the runs started here would inherit it ignored:
	// while this test has a handler of its own, they start with SIGHUP's
	// default instead.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t.Run("wavelet", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "out.csv")
		err, se, n := interrupt(t, append(resumeWavelet, "--out", out), out+".ckpt", 0, syscall.SIGHUP)
		stoppedForResume(t, err, se)
		if !strings.Contains(se, "interrupted") || n == 0 {
			t.Errorf("stderr %q, checkpoint of %d records: want the run's note of what is saved", se, n)
		}
		if names := dotFiles(t, dir); len(names) != 0 {
			t.Errorf("left temporary files %v", names)
		}
		if _, err := os.Stat(out + ".lock"); err == nil {
			t.Error("left the lock file")
		}
	})
	t.Run("affinity", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "ah.npy")
		cmd, se, done := startRun(t, []string{"affinity", "-n", "20000", "--height", "64", "--width", "64", "--quiet", "--out", out})
		waitFile(t, out+".lock", done, se)
		cmd.Process.Signal(syscall.SIGHUP)
		var err error
		select {
		case err = <-done:
		case <-time.After(hangAfter):
			cmd.Process.Kill()
			t.Fatalf("hung: still running %v after SIGHUP", hangAfter)
		}
		msg := strings.TrimSpace(se.String())
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.Contains(msg, "\n") ||
			!strings.HasSuffix(msg, "nothing was written") || !(strings.Contains(msg, "interrupted") || strings.Contains(msg, "stopped by SIGHUP")) {
			t.Errorf("exit %v, stderr %q; want status 1 and one line saying it stopped and nothing was written", err, msg)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("left %v", entries)
		}
	})
	t.Run("nohup", func(t *testing.T) {
		nohup, err := exec.LookPath("nohup")
		if err != nil {
			t.Skip("no nohup")
		}
		dir := t.TempDir()
		out := filepath.Join(dir, "out.csv")
		cmd := exec.Command(nohup, append([]string{binary}, append(resumeWavelet, "--out", out)...)...)
		cmd.Dir = dir // nohup's own note, if any, goes to dir/nohup.out
		var se strings.Builder
		cmd.Stderr = &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		waitFile(t, out+".lock", done, &se)
		cmd.Process.Signal(syscall.SIGHUP)
		if err := <-done; err != nil {
			t.Fatalf("under nohup, after SIGHUP: %v: %s", err, se.String())
		}
		if b, err := os.ReadFile(out); err != nil || len(b) == 0 {
			t.Errorf("no output after SIGHUP under nohup: %v", err)
		}
	})
}

// TestKilledRunsLockTakenOver: the lock file and temporary file a run
// killed by SIGKILL leaves hold nothing back: the next run in the
// directory, on another output, removes both, and a run on the same
// output takes the lock over.
func TestKilledRunsLockTakenOver(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "ah.npy")
	kill := func() {
		cmd, se, done := startRun(t, []string{"affinity", "-n", "20000", "--height", "64", "--width", "64", "--quiet", "--out", out})
		waitFile(t, out+".lock", done, se)
		for deadline := time.Now().Add(hangAfter); len(dotFiles(t, dir)) == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		cmd.Process.Kill()
		<-done
		if _, err := os.Stat(out + ".lock"); err != nil || len(dotFiles(t, dir)) == 0 {
			t.Fatalf("the killed run left no lock file (%v) or no temporary file (%v)", err, dotFiles(t, dir))
		}
	}
	kill()
	small := filepath.Join(dir, "small.npy")
	if _, se, code := run(t, "interp", "--points", "2000", "--interpolants", "8", "--grid", "64", "--quiet", "--out", small); code != 0 {
		t.Fatalf("interp: exit %d: %s", code, se)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("after a run on another output the directory holds %v, want small.npy alone", entries)
	}
	kill()
	if _, se, code := run(t, "affinity", "-n", "100", "--height", "8", "--width", "8", "--quiet", "--out", out); code != 0 {
		t.Fatalf("a run on the killed run's output: exit %d: %s", code, se)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("after a run on the same output the directory holds %v, want ah.npy and small.npy", entries)
	}
}
