package main

// Checkpoints at the edges a cluster job meets: two runs on one output,
// checkpoints holding records of another run, repeated or out of order,
// a resumed run on the small disk its first run fitted, and kills at
// random moments.

import (
	"bytes"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/checkpoint"
)

// startRun starts tapeloop with args; its stderr goes to the buffer.
func startRun(t *testing.T, args []string) (*exec.Cmd, *bytes.Buffer, chan error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, &se, done
}

// waitRecords waits until the checkpoint ckpt holds more than n records.
func waitRecords(t *testing.T, ckpt string, n int, done chan error, se *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for {
		if c, err := checkpoint.Count(ckpt); err == nil && c > n {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before its checkpoint held %d records: %s", err, n+1, se.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("hung: no checkpoint record after %v", hangAfter)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killRun kills a started run and waits for it.
func killRun(cmd *exec.Cmd, done chan error) {
	cmd.Process.Kill()
	<-done
}

// faultWorkloads are a DRR run and a wavelet sweep of a few seconds each,
// their output and checkpoint paths under dir.
func faultWorkloads(dir string) []struct {
	name, out, ckpt string
	args            []string
} {
	return []struct {
		name, out, ckpt string
		args            []string
	}{
		{"drr", filepath.Join(dir, "drr"), filepath.Join(dir, "drr", "drr.npy.ckpt"), append(append([]string{}, resumeDRR...), "--out", filepath.Join(dir, "drr"))},
		{"wavelet", filepath.Join(dir, "w.csv"), filepath.Join(dir, "w.csv.ckpt"), append(append([]string{}, resumeWavelet...), "--out", filepath.Join(dir, "w.csv"))},
	}
}

// TestCheckpointRacingRuns: while a resumed run writes an output, a second
// --resume and a second fresh run on it are refused at once, naming the
// live run's pid, and change nothing; the output, finished later, is the
// uninterrupted run's.
func TestCheckpointRacingRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds: make test-full runs it (TestOutputLockAffinity is the fast case)")
	}
	refDir, dir := t.TempDir(), t.TempDir()
	refs, cases := faultWorkloads(refDir), faultWorkloads(dir)
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, se, code := run(t, refs[k].args...); code != 0 {
				t.Fatalf("uninterrupted run: exit %d: %s", code, se)
			}
			resume := append(append([]string{}, c.args...), "--resume")
			cmd, se, done := startRun(t, c.args)
			waitRecords(t, c.ckpt, 0, done, se)
			killRun(cmd, done)
			n, _ := checkpoint.Count(c.ckpt)

			live, se, done := startRun(t, resume)
			waitRecords(t, c.ckpt, n, done, se)
			for _, second := range [][]string{resume, c.args} {
				_, msg, code := runOrHang(t, second...)
				want := fmt.Sprintf("another tapeloop run is writing this output (pid %d", live.Process.Pid)
				if code != 1 || strings.Count(strings.TrimSpace(msg), "\n") != 0 || !strings.Contains(msg, want) {
					t.Errorf("second run %v: exit %d, stderr %q; want 1 and one line saying %q", second[len(second)-1], code, msg, want)
				}
			}
			select {
			case err := <-done:
				t.Fatalf("the live run ended (%v) while the second runs were refused: %s", err, se.String())
			default:
			}
			killRun(live, done)
			if _, se, code := run(t, resume...); code != 0 {
				t.Fatalf("last --resume: exit %d: %s", code, se)
			}
			if c.name == "drr" {
				sameTree(t, refs[k].out, c.out)
			} else {
				sameFile(t, refs[k].out, c.out)
			}
			for _, left := range []string{c.ckpt, checkpoint.LockPath(c.ckpt)} {
				if _, err := os.Stat(left); err == nil {
					t.Errorf("%s left after the run finished", left)
				}
			}
		})
	}
}

// splitCheckpoint cuts a checkpoint's bytes into its header and its
// records (each with its item and CRC).
func splitCheckpoint(t *testing.T, b []byte) (head []byte, recs [][]byte) {
	t.Helper()
	const magicLen = len("TAPELOOP-CHECKPOINT-2\n")
	if len(b) < magicLen+4 {
		t.Fatalf("checkpoint of %d bytes", len(b))
	}
	n := int(bin.LittleEndian.Uint32(b[magicLen:]))
	var h checkpoint.Header
	if err := json.Unmarshal(b[magicLen+4:magicLen+4+n], &h); err != nil {
		t.Fatal(err)
	}
	head = b[:magicLen+4+n]
	frame := int(checkpoint.FrameBytes(h.Record))
	for p := len(head); p+frame <= len(b); p += frame {
		recs = append(recs, b[p:p+frame])
	}
	return head, recs
}

// TestCheckpointForeignRecords: a checkpoint whose records are another
// run's (same sizes, valid CRCs there), mixed with its own, repeated and
// out of order, resumes to the uninterrupted run's output: a record is
// never applied to another item or run, and the skipped ones are said.
func TestCheckpointForeignRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds: make test-full runs it (internal/checkpoint has the fast cases)")
	}
	refDir, dir, otherDir := t.TempDir(), t.TempDir(), t.TempDir()
	refs, cases, others := faultWorkloads(refDir), faultWorkloads(dir), faultWorkloads(otherDir)
	// The other run differs in its inputs only: the same record sizes.
	others[0].args = append(others[0].args, "--sid", "600")
	others[1].args = append(others[1].args, "--seed", "7")
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, se, code := run(t, refs[k].args...); code != 0 {
				t.Fatalf("uninterrupted run: exit %d: %s", code, se)
			}
			killAfter := func(args []string, ckpt string, n int) {
				cmd, se, done := startRun(t, args)
				waitRecords(t, ckpt, n, done, se)
				killRun(cmd, done)
			}
			killAfter(c.args, c.ckpt, 2)
			killAfter(others[k].args, others[k].ckpt, 2)
			mine, _ := os.ReadFile(c.ckpt)
			theirs, _ := os.ReadFile(others[k].ckpt)
			head, own := splitCheckpoint(t, mine)
			_, foreign := splitCheckpoint(t, theirs)
			if len(own) < 3 || len(foreign) < 3 {
				t.Fatalf("%d and %d records", len(own), len(foreign))
			}
			for _, mix := range []struct {
				name string
				recs [][]byte
			}{
				{"another run's records only", foreign},
				{"another run's records among its own", [][]byte{own[0], foreign[1], own[2], foreign[0], own[1]}},
				{"its own repeated and out of order", [][]byte{own[2], own[0], own[2], own[1], own[0]}},
			} {
				b := bytes.Join(append([][]byte{head}, mix.recs...), nil)
				if err := os.WriteFile(c.ckpt, b, 0o644); err != nil {
					t.Fatal(err)
				}
				_, se, code := run(t, append(append([]string{}, c.args...), "--resume")...)
				if code != 0 {
					t.Fatalf("%s: --resume exit %d: %s", mix.name, code, se)
				}
				if c.name == "drr" {
					sameTree(t, refs[k].out, c.out)
				} else {
					sameFile(t, refs[k].out, c.out)
				}
				if !strings.Contains(se, "records skipped") {
					t.Errorf("%s: stderr %q does not say records were skipped", mix.name, se)
				}
				t.Logf("%s: %s", mix.name, strings.TrimSpace(se))
				// The next mix starts from a killed run again.
				os.RemoveAll(c.out)
				os.MkdirAll(filepath.Dir(c.ckpt), 0o755)
			}
		})
	}
}

// TestCheckpointResumeFitsItsDisk: a DRR run with PNGs that fitted a small
// file system, killed when more than half done, resumes there: the
// temporary files of the killed run are removed before the space is
// counted, and only the records still to come are counted again. Needs
// root (a tmpfs of 32 MiB).
func TestCheckpointResumeFitsItsDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	args := []string{"drr", "--size", "128", "--orbit", "300", "--detector", "96x96", "--pixel", "3",
		"--method", "trilinear", "--batch", "2", "--png", "--quiet"}
	ref, out := filepath.Join(t.TempDir(), "ref"), filepath.Join(mnt, "out")
	if _, se, code := run(t, append(args, "--out", ref)...); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, se)
	}
	run1 := append(append([]string{}, args...), "--out", out)
	ckpt := filepath.Join(out, "drr.npy.ckpt")
	cmd, se, done := startRun(t, run1)
	waitRecords(t, ckpt, 180, done, se)
	killRun(cmd, done)
	// The check is meaningful only if counting everything again would
	// not fit what is free now.
	var st syscall.Statfs_t
	syscall.Statfs(mnt, &st)
	free := int64(st.Bavail) * int64(st.Bsize) // Bsize: uint32 on darwin
	whole := int64(300)*(96*96*6) + 300*checkpoint.FrameBytes(8+4*96*96)
	if free >= whole {
		t.Fatalf("%d bytes free after the kill, the whole run takes %d: the disk is not small enough to tell", free, whole)
	}
	if len(dotFiles(t, out)) == 0 {
		t.Fatal("the killed run left no temporary files")
	}
	if _, se, code := run(t, append(run1, "--resume")...); code != 0 {
		t.Fatalf("--resume on the disk the run fitted: exit %d: %s", code, se)
	}
	sameTree(t, ref, out)
}

// TestCheckpointRandomKills: runs killed (SIGKILL) at random moments, each
// followed by --resume, never leave an output that differs from the
// uninterrupted run's, and end with the same bytes: drr.npy appears only
// once every PNG is in place.
func TestCheckpointRandomKills(t *testing.T) {
	if testing.Short() {
		t.Skip("random kills: make test-full runs them (TestWaveletResume is the fast case)")
	}
	refDir, dir := t.TempDir(), t.TempDir()
	drrArgs := []string{"drr", "--size", "64", "--orbit", "40", "--detector", "64x64", "--pixel", "3",
		"--method", "trilinear", "--batch", "2", "--png", "--quiet"}
	ref, out := filepath.Join(refDir, "d"), filepath.Join(dir, "d")
	start := time.Now()
	if _, se, code := run(t, append(drrArgs, "--out", ref)...); code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, se)
	}
	span := time.Since(start) + 200*time.Millisecond
	ckpt := filepath.Join(out, "drr.npy.ckpt")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	finished := 0
	for trial := range 20 {
		args := append(append([]string{}, drrArgs...), "--out", out)
		if _, err := os.Stat(ckpt); err == nil {
			args = append(args, "--resume")
		} else if _, err := os.Stat(filepath.Join(out, "drr.npy")); err == nil {
			os.RemoveAll(out) // finished: start over
		}
		cmd, se, done := startRun(t, args)
		wait := time.Duration(rng.Int64N(int64(span)))
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("trial %d: %v: %s", trial, err, se.String())
			}
			finished++
		case <-time.After(wait):
			killRun(cmd, done)
		}
		// Whatever is in place is the uninterrupted run's.
		entries, _ := os.ReadDir(out)
		npyThere := false
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".ckpt") || strings.HasSuffix(name, ".lock") {
				continue
			}
			sameFile(t, filepath.Join(ref, name), filepath.Join(out, name))
			npyThere = npyThere || name == "drr.npy"
		}
		if npyThere {
			for i := range 40 {
				if _, err := os.Stat(filepath.Join(out, fmt.Sprintf("drr_%04d.png", i))); err != nil {
					t.Errorf("trial %d: drr.npy in place without %v", trial, err)
				}
			}
		}
	}
	args := append(append([]string{}, drrArgs...), "--out", out)
	if _, err := os.Stat(ckpt); err == nil {
		args = append(args, "--resume")
	}
	if _, se, code := run(t, args...); code != 0 {
		t.Fatalf("last run: exit %d: %s", code, se)
	}
	sameTree(t, ref, out)
	t.Logf("20 trials, %d ran to the end before their kill", finished)
}

// TestWaveletHugeScaleRefusedAtOnce: a scale whose kernel could never fit
// is refused by the planner at once.
func TestWaveletHugeScaleRefusedAtOnce(t *testing.T) {
	for _, a := range []string{"1e9", "1e300"} {
		_, se, code := runOrHang(t, "wavelet", "--size", "24x24x24", "-a", a, "--quiet")
		if code != 1 || !strings.Contains(se, "over the memory limit") || strings.Count(se, "\n") != 1 {
			t.Errorf("-a %s: exit %d, stderr %q; want 1 and one line of the planner's refusal", a, code, se)
		}
	}
}

// TestOutputLockAffinity: a second affinity run on an output being written
// is refused, not waited on, naming the live run's pid; the first finishes
// whole and leaves no lock file.
func TestOutputLockAffinity(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "a.npy")
	args := []string{"affinity", "-n", "6000", "--height", "64", "--width", "64", "--metric", "l1", "--batch", "64", "--out", out, "--quiet"}
	first, se, done := startRun(t, args)
	lock := checkpoint.LockPath(checkpoint.Path(out))
	for deadline := time.Now().Add(hangAfter); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(lock); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hung: no lock file after %v", hangAfter)
		}
	}
	_, msg, code := run(t, args...)
	want := fmt.Sprintf("another tapeloop run is writing this output (pid %d", first.Process.Pid)
	if code != 1 || !strings.Contains(msg, want) || strings.Count(msg, "\n") != 1 {
		t.Errorf("second run: exit %d, stderr %q; want 1 and one line saying %q", code, msg, want)
	}
	if err := <-done; err != nil {
		t.Fatalf("the first run: %v: %s", err, se.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "a.npy" {
		t.Errorf("the directory holds %v, want only a.npy", entries)
	}
}
