package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalStopsTheRun sends SIGTERM to runs that would take far longer
// than the test waits: a single batch of DRRs (stopped inside the op, or,
// when a block of its work outlasts the 0.8 s the process allows, by the
// process) and an affinity run still making its images (stopped during
// set-up). Each must end with exit status 1 and one line, and leave nothing
// in its output directory.
func TestSignalStopsTheRun(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"during a batch", []string{"drr", "--size", "200", "--orbit", "1", "--detector", "1024x1024", "--pixel", "0.3",
			"--method", "trilinear", "--step", "0.005", "--quiet"}, "interrupted during the batch|stopped by SIGTERM"},
		{"during set-up", []string{"affinity", "-n", "100000", "--height", "50", "--width", "50", "--quiet"}, "stopped by SIGTERM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out", "here")
			if c.args[0] == "affinity" {
				out = filepath.Join(dir, "a.npy")
			}
			cmd := exec.Command(binary, append(c.args, "--out", out)...)
			var se bytes.Buffer
			cmd.Stderr = &se
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			sent := time.Now()
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(hangAfter):
				cmd.Process.Kill()
				t.Fatalf("hung: still running %v after SIGTERM", hangAfter)
			}
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit %v after SIGTERM, want status 1; stderr %q", err, se.String())
			}
			msg := strings.TrimSpace(se.String())
			if strings.Count(msg, "\n") != 0 || !regexp.MustCompile(c.want).MatchString(msg) || !strings.Contains(msg, "nothing was written") {
				t.Errorf("stderr %q, want one line saying %q", msg, c.want)
			}
			t.Logf("stopped %v after SIGTERM: %s", time.Since(sent).Round(time.Millisecond), msg)
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Errorf("left %v in the output directory", entries)
			}
		})
	}
}
