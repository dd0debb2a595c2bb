package main

// Runs under the process limits a user or a batch system sets: an address
// space (ulimit -v) smaller than the work, and few file descriptors
// (ulimit -n). Each must end in success or in one "tapeloop: " line with
// exit status 1, never in a Go runtime trace.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
)

// limitsVmKiB is the address-space limit of the ulimit -v cases: 3,000,000
// KiB, as a user would type it.
const limitsVmKiB = 3000000

// runLimited runs tapeloop in dir under the shell limits ulimit (e.g.
// "-v 3000000") and returns its exit status and stderr. It fails the test
// unless the run ended with status 0 or with status 1 and one
// "tapeloop: " line (after any warning lines), without a trace, within two
// minutes.
func runLimited(t *testing.T, dir, ulimit string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := fmt.Sprintf(`ulimit %s && exec "$0" "$@"`, ulimit)
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, binary}, args...)...)
	cmd.Dir = dir
	cmd.Env = filterEnvPrefix(os.Environ(), "TAPELOOP_", "SLURM_", "JOB_COMPLETION_INDEX", "GOMAXPROCS")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &se
	err := cmd.Run()
	what := fmt.Sprintf("ulimit %s; tapeloop %s", ulimit, strings.Join(args, " "))
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after 2 minutes", what)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	msg := se.String()
	// The error's line may follow warning lines (a --mem-limit lowered).
	errLine := msg
	for strings.HasPrefix(errLine, "tapeloop: warning: ") && strings.Count(errLine, "\n") > 1 {
		_, errLine, _ = strings.Cut(errLine, "\n")
	}
	switch {
	case strings.Contains(msg, "fatal error") || strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic"):
		t.Errorf("%s: crashed (status %d): %q", what, code, tail(msg))
	case code == 0:
	case code != 1:
		t.Errorf("%s: exit status %d, want 0 or 1; stderr %q", what, code, tail(msg))
	case !strings.HasPrefix(errLine, "tapeloop: ") || strings.Count(errLine, "\n") != 1 || !strings.HasSuffix(errLine, "\n"):
		t.Errorf("%s: stderr is not one 'tapeloop: ' line, after any warnings: %q", what, tail(msg))
	}
	if testing.Verbose() {
		t.Logf("%s: status %d: %s", what, code, strings.TrimSpace(msg))
	}
	return code, msg
}

// TestLimitsAddressSpace: under ulimit -v 3000000, the default memory
// limit fits what the process may still map, so work larger than that is
// refused up front by the planner and smaller work runs; a --mem-limit
// over what it leaves (TestLimitsMemLimitLowered) is lowered.
func TestLimitsAddressSpace(t *testing.T) {
	ulimit := fmt.Sprintf("-v %d", limitsVmKiB)
	cases := []struct {
		name string
		args []string
		code int    // the exit status wanted
		want string // with status 1, the message says this
	}{
		{"interp table of 3 GiB", []string{"interp", "--interpolants", "100000", "--grid", "4096", "--points", "1000", "--quiet"}, 1, "over the memory limit"},
		{"affinity images of 1.5 GiB", []string{"affinity", "-n", "100000", "--height", "64", "--width", "64", "--quiet"}, 1, "over the memory limit"},
		{"wavelet padded volume over the limit", []string{"wavelet", "--size", "640x640x640", "--theta", "0", "--phi", "0", "--xi", "1", "--quiet"}, 1, "over the memory limit"},
		{"interp in smaller batches", []string{"interp", "--points", "30000000", "--quiet"}, 0, ""},
		{"drr that fits", []string{"drr", "--size", "256", "--orbit", "4", "--quiet"}, 0, ""},
		{"mem-limit over ulimit -v, lowered", []string{"drr", "--size", "64", "--orbit", "2", "--mem-limit", "8GiB", "--quiet"}, 0, ""},
		{"mem-limit over what ulimit -v leaves, lowered", []string{"affinity", "-n", "20000", "--height", "32", "--width", "32", "--mem-limit", "2800MB", "--quiet"}, 0, ""},
		{"mem-limit lowered, then over it", []string{"interp", "--interpolants", "100000", "--grid", "4096", "--points", "1000", "--mem-limit", "2800MB", "--quiet"}, 1, "lowered from --mem-limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name == "mem-limit over what ulimit -v leaves, lowered" {
				t.Skip("a run at full size: make test-full runs it (the next case lowers the limit too)")
			}
			code, msg := runLimited(t, t.TempDir(), ulimit, c.args...)
			if code != c.code {
				t.Fatalf("exit status %d, want %d: %q", code, c.code, tail(msg))
			}
			if c.code == 1 && !strings.Contains(msg, c.want) {
				t.Errorf("message %q does not say %q", msg, c.want)
			}
			if c.code == 1 && strings.Contains(msg, "over the memory limit") && !strings.Contains(msg, "ulimit -v 3000000") {
				t.Errorf("message %q does not say that ulimit -v set the limit", msg)
			}
		})
	}
}

// TestLimitsMemLimitLowered: a --mem-limit above what ulimit -v or
// ulimit -d leaves the process is lowered to that, with one warning line
// on stderr naming the limit, and the run goes on; the report has the
// lowered limit and the warning.
func TestLimitsMemLimitLowered(t *testing.T) {
	for _, flag := range []string{"-v", "-d"} {
		t.Run("ulimit "+flag, func(t *testing.T) {
			dir := t.TempDir()
			report := filepath.Join(dir, "r.json")
			code, msg := runLimited(t, dir, fmt.Sprintf("%s %d", flag, limitsVmKiB), "drr", "--size", "64", "--orbit", "2",
				"--mem-limit", "8GiB", "--quiet", "--report", report, "--out", filepath.Join(dir, "out"))
			if code != 0 {
				t.Fatalf("exit status %d: %q", code, tail(msg))
			}
			prefix := fmt.Sprintf("tapeloop: warning: --mem-limit 8.0 GiB is more than ulimit %s %d (2.9 GiB) leaves this process", flag, limitsVmKiB)
			if !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, ": lowered to ") || strings.Count(msg, "\n") != 1 {
				t.Errorf("stderr %q, want one line starting %q", msg, prefix)
			}
			var r struct {
				Limit   int64  `json:"mem_limit_bytes"`
				Warning string `json:"mem_limit_warning"`
			}
			b, err := os.ReadFile(report)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if r.Limit <= 0 || r.Limit >= limitsVmKiB<<10 || !strings.Contains(msg, "lowered to "+humanize.IBytes(uint64(r.Limit))) {
				t.Errorf("report: limit %d under ulimit %s %d KiB; stderr %q", r.Limit, flag, limitsVmKiB, msg)
			}
			if r.Warning == "" || !strings.Contains(msg, r.Warning) {
				t.Errorf("report's warning %q, stderr %q", r.Warning, msg)
			}
		})
	}
}

// TestLimitsAddressSpaceTwoGiB: under ulimit -v 2000000, a batch
// system's common h_vmem of 2G, small runs of every workload fit: the
// process keeps to one malloc arena, so its threads reserve no 64 MiB
// arenas of address space each; and under a limit that leaves nothing
// after what the process maps at start, the refusal says so.
func TestLimitsAddressSpaceTwoGiB(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"interp", "--points", "100000", "--mem-limit", "50MiB", "--quiet"},
		{"affinity", "-n", "500", "--height", "16", "--width", "16", "--quiet"},
		{"wavelet", "--size", "16x16x16", "--theta", "0", "--phi", "0", "--xi", "1", "--quiet"},
		{"drr", "--size", "32", "--orbit", "2", "--quiet"},
	} {
		// With GOMAXPROCS 64, as on a node of 64 cores, the threads are
		// lowered to fit: their stacks would take all that is left.
		for _, env := range []string{"", " && export GOMAXPROCS=64"} {
			if code, msg := runLimited(t, dir, "-v 2000000"+env, append(args, "--out", filepath.Join(dir, "o-"+args[0]))...); code != 0 {
				t.Errorf("%s%s: exit status %d: %q", args[0], env, code, tail(msg))
			}
		}
	}
	code, msg := runLimited(t, dir, "-v 1400000", "interp", "--points", "1000", "--quiet", "--out", filepath.Join(dir, "o.npy"))
	if code == 1 && !strings.Contains(msg, "ulimit -v 1400000 leaves this process nothing: it has ") {
		t.Errorf("ulimit -v 1400000: %q", msg)
	}
}

// TestLimitsAddressSpaceDRRPhantom: drr --size 1024 makes a 4 GiB
// phantom, more than ulimit -v 3000000 allows in all: it must be refused
// before the phantom is made.
func TestLimitsAddressSpaceDRRPhantom(t *testing.T) {
	code, msg := runLimited(t, t.TempDir(), fmt.Sprintf("-v %d", limitsVmKiB), "drr", "--size", "1024", "--quiet")
	if code != 1 || !strings.Contains(msg, "over the memory limit") {
		t.Errorf("exit status %d, message %q; want 1 and the planner's refusal", code, tail(msg))
	}
}

// TestLimitsOpenFiles runs every workload, writing its outputs and a
// report, under ulimit -n 8, 12 and 16: it must succeed or end with one
// line; running out of descriptors must be named with the limit, and a
// checkpoint mentioned only when one exists.
func TestLimitsOpenFiles(t *testing.T) {
	workloads := []struct {
		name string
		args []string
	}{
		{"interp", []string{"interp", "--points", "1000", "--out", "o.npy"}},
		{"affinity", []string{"affinity", "-n", "60", "--height", "8", "--width", "8", "--out", "a.npz"}},
		{"affinity shard", []string{"affinity", "-n", "60", "--height", "8", "--width", "8", "--shard", "0/2", "--out", "s.npz"}},
		{"drr", []string{"drr", "--size", "16", "--orbit", "3", "--detector", "8x8", "--out", "d", "--png"}},
		{"wavelet", []string{"wavelet", "--size", "8x8x8", "--theta", "0", "--phi", "0", "--xi", "1,2", "--out", "w.csv"}},
	}
	for _, n := range []int{5, 8, 12, 16} { // 5: too few for the Go runtime to start
		for _, w := range workloads {
			t.Run(fmt.Sprintf("%s ulimit -n %d", w.name, n), func(t *testing.T) {
				dir := t.TempDir()
				args := append(append([]string{}, w.args...), "--report", "r.json", "--quiet")
				code, msg := runLimited(t, dir, fmt.Sprintf("-n %d", n), args...)
				if code == 0 {
					return
				}
				if strings.Contains(msg, "too many open files") && (!strings.Contains(msg, fmt.Sprintf("too many open files (ulimit -n %d)", n)) || !strings.Contains(msg, "raise it with ulimit -n")) {
					t.Errorf("message %q does not name the limit", msg)
				}
				if strings.Contains(msg, "remove it to start over") || strings.Contains(msg, "holds") {
					t.Errorf("message %q speaks of an earlier run's checkpoint; there is none", msg)
				}
				if strings.Contains(msg, "--resume") {
					var ckpts []string
					filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
						if strings.HasSuffix(p, ".ckpt") {
							ckpts = append(ckpts, p)
						}
						return nil
					})
					if len(ckpts) == 0 {
						t.Errorf("message %q tells to resume, and no checkpoint was kept", msg)
					}
				}
			})
		}
	}
}
