package main

// Every output appears whole or not at all, and every failed write ends
// the run with exit status 1 and one "tapeloop: " line: the result on
// standard output (a full device, a closed pipe), the profiles and the
// report (a file size limit, a full file system), and a run refused
// before its first batch.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// outputsRun is one run of tapeloop for these tests.
type outputsRun struct {
	args   []string
	dir    string   // working directory
	stdout *os.File // nil: a buffer
	fsize  int      // ulimit -f, in the shell's 512-byte blocks; < 0: none
	closed bool     // standard output closed (>&-)
}

// run runs r and returns stdout, stderr and the exit status; a run killed
// by a signal fails the test.
func (r outputsRun) run(t *testing.T) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, r.args...)
	if r.fsize >= 0 || r.closed {
		script := `exec "$0" "$@"`
		if r.closed {
			script += ` >&-`
		}
		if r.fsize >= 0 {
			script = `ulimit -f ` + strconv.Itoa(r.fsize) + ` && ` + script
		}
		cmd = exec.Command("/bin/sh", append([]string{"-c", script, binary}, r.args...)...)
	}
	cmd.Dir = r.dir
	cmd.Env = append(filterEnvPrefix(os.Environ(), "TAPELOOP_", "SLURM_", "JOB_COMPLETION_INDEX"), "TAPELOOP_MEM_LIMIT=1GiB")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if r.stdout != nil {
		cmd.Stdout = r.stdout
	}
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(hangAfter):
		cmd.Process.Kill()
		t.Fatalf("tapeloop %s: hung: still running after %v", strings.Join(r.args, " "), hangAfter)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("tapeloop %s: killed by %v; stderr %q", strings.Join(r.args, " "), ws.Signal(), tail(se.String()))
		}
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

// failsWithOneLine checks a failed run: exit status 1 and stderr one
// "tapeloop: " line holding every one of want.
func failsWithOneLine(t *testing.T, args []string, stderr string, code int, want ...string) {
	t.Helper()
	what := "tapeloop " + strings.Join(args, " ")
	switch {
	case code != 1:
		t.Errorf("%s: exit status %d, want 1; stderr %q", what, code, tail(stderr))
	case strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine"):
		t.Errorf("%s: crashed: %q", what, tail(stderr))
	case !strings.HasPrefix(stderr, "tapeloop: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n"):
		t.Errorf("%s: stderr is not one 'tapeloop: ' line: %q", what, tail(stderr))
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s: message %q does not say %q", what, strings.TrimSpace(stderr), w)
		}
	}
}

// dirContents maps every name in dir, hidden ones included, to its
// contents; a directory's name ends in a slash.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() {
			out[e.Name()+"/"] = ""
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// sameContents fails the test when dir does not hold exactly want.
func sameContents(t *testing.T, args []string, dir string, want map[string]string) {
	t.Helper()
	got := dirContents(t, dir)
	for name, b := range got {
		if w, ok := want[name]; !ok {
			t.Errorf("tapeloop %s: left %s (%d bytes)", strings.Join(args, " "), name, len(b))
		} else if b != w {
			t.Errorf("tapeloop %s: changed %s: %d bytes, was %d", strings.Join(args, " "), name, len(b), len(w))
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("tapeloop %s: removed %s", strings.Join(args, " "), name)
		}
	}
}

// Small runs of each workload, printing their result to standard output.
var (
	outputsInterp   = []string{"interp", "--points", "2000", "--interpolants", "8", "--grid", "64", "--quiet"}
	outputsAffinity = []string{"affinity", "-n", "20", "--height", "4", "--width", "4", "--quiet"}
	outputsDRR      = []string{"drr", "--size", "16", "--orbit", "2", "--detector", "8x8", "--quiet"}
	outputsWavelet  = []string{"wavelet", "--size", "8x8x8", "--theta", "0,1", "--phi", "0", "--xi", "1", "--quiet"}
)

func TestOutputsResultToFullStdout(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	cases := []struct {
		args []string
		name string // the command the message names
	}{
		{append(slices.Clone(outputsInterp), "--out", "q.npy", "--report", "r.json"), "interp"},
		{append(slices.Clone(outputsAffinity), "--out", "a.npy", "--report", "r.json"), "affinity"},
		{append(slices.Clone(outputsDRR), "--out", "drr", "--report", "r.json"), "drr"},
		{append(slices.Clone(outputsWavelet), "--report", "r.json"), "wavelet"}, // the CSV to standard output
		{append(slices.Clone(outputsWavelet), "--save-response", "0,0,1:g.npy"), "wavelet"},
		{[]string{"demo"}, "demo"},
		{[]string{"info"}, "info"},
		{[]string{"dot", "interp", "--points", "100"}, "dot interp"},
		{[]string{"--help"}, ""},
		{[]string{"merge", "--help"}, ""},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:min(2, len(c.args))], " "), func(t *testing.T) {
			dir := t.TempDir()
			_, stderr, code := outputsRun{args: c.args, dir: dir, stdout: full, fsize: -1}.run(t)
			want := "tapeloop: write /dev/stdout: no space left on device\n"
			if c.name != "" {
				want = "tapeloop: " + c.name + ": write /dev/stdout: no space left on device\n"
			}
			failsWithOneLine(t, c.args, stderr, code)
			if c.name == "drr" { // its finished poses stay in a checkpoint, for --resume
				want = strings.TrimSuffix(want, "\n") + "; 2 of 2 poses done, saved in drr/drr.npy.ckpt: rerun the same command with --resume to continue\n"
			}
			if stderr != want {
				t.Errorf("tapeloop %s: stderr %q, want %q", strings.Join(c.args, " "), stderr, want)
			}
			// A run whose result was not written commits nothing.
			left := map[string]string{}
			if c.name == "drr" {
				left["drr/"] = ""
				ckpt := dirContents(t, filepath.Join(dir, "drr"))
				if len(ckpt) != 1 || ckpt["drr.npy.ckpt"] == "" {
					t.Errorf("drr/ holds %v, want the checkpoint alone", keys(ckpt))
				}
			}
			sameContents(t, c.args, dir, left)
		})
	}
}

// TestOutputsClosedStdout: a standard output closed at start (>&-) fails
// a run that prints to it, as /dev/full does, committing nothing; a run
// that prints nothing there succeeds; > /dev/null is not closed.
func TestOutputsClosedStdout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("standard output closed at start is told apart on Linux only")
	}
	for _, c := range []struct {
		args []string
		name string // the command the message names
	}{
		{slices.Clone(outputsWavelet), "wavelet"}, // the CSV to standard output
		{append(slices.Clone(outputsWavelet), "--save-response", "0,0,1:g.npy"), "wavelet"},
		{append(slices.Clone(outputsAffinity), "--out", "a.npy", "--report", "r.json"), "affinity"},
		{[]string{"info"}, "info"},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			dir := t.TempDir()
			_, stderr, code := outputsRun{args: c.args, dir: dir, fsize: -1, closed: true}.run(t)
			failsWithOneLine(t, c.args, stderr, code)
			if want := "tapeloop: " + c.name + ": write /dev/stdout: standard output is closed\n"; stderr != want {
				t.Errorf("tapeloop %s: stderr %q, want %q", strings.Join(c.args, " "), stderr, want)
			}
			sameContents(t, c.args, dir, map[string]string{})
		})
	}
	t.Run("nothing printed", func(t *testing.T) {
		dir := t.TempDir()
		args := append(slices.Clone(outputsWavelet), "--out", "w.csv", "--save-response", "0,0,1:g.npy")
		_, stderr, code := outputsRun{args: args, dir: dir, fsize: -1, closed: true}.run(t)
		if code != 0 {
			t.Fatalf("tapeloop %s: exit status %d; stderr %q", strings.Join(args, " "), code, stderr)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "w.csv")); err != nil || !strings.HasPrefix(string(b), "theta,phi,xi,") {
			t.Errorf("w.csv: %q, %v", b, err)
		}
		if st, err := os.Stat(filepath.Join(dir, "g.npy")); err != nil || st.Size() != 128+8*8*8*4 {
			t.Errorf("g.npy: %v, %v", st, err)
		}
	})
	t.Run("dev null", func(t *testing.T) {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			t.Skip(err)
		}
		defer null.Close()
		_, stderr, code := outputsRun{args: outputsWavelet, dir: t.TempDir(), stdout: null, fsize: -1}.run(t)
		if code != 0 {
			t.Fatalf("tapeloop %s > /dev/null: exit status %d; stderr %q", strings.Join(outputsWavelet, " "), code, stderr)
		}
	})
}

func TestOutputsBrokenPipe(t *testing.T) {
	cases := [][]string{
		// Enough rows that the CSV outgrows any buffer: the write fails
		// during the run.
		{"wavelet", "--size", "8x8x8", "--theta", "0:3:300", "--phi", "0", "--xi", "1", "--quiet", "--report", "r.json"},
		append(slices.Clone(outputsInterp), "--report", "r.json", "--out", "q.npy"),
	}
	for _, args := range cases {
		t.Run(args[0], func(t *testing.T) {
			dir := t.TempDir()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close() // the reader is gone before the first write
			_, stderr, code := outputsRun{args: args, dir: dir, stdout: w, fsize: -1}.run(t)
			w.Close()
			failsWithOneLine(t, args, stderr, code, "tapeloop: "+args[0]+": write /dev/stdout: broken pipe")
			sameContents(t, args, dir, map[string]string{})
		})
	}
}

func TestOutputsUnderFileSizeLimit(t *testing.T) {
	const old = "an earlier run's file\n"
	cases := []struct {
		flag, file string
	}{
		{"--cpuprofile", "cpu.prof"},
		{"--memprofile", "mem.prof"},
		{"--trace", "run.trace"},
		{"--report", "report.json"},
	}
	for _, c := range cases {
		for _, existing := range []bool{false, true} {
			name := strings.TrimPrefix(c.flag, "--")
			if existing {
				name += "/existing"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				before := map[string]string{}
				if existing {
					if err := os.WriteFile(filepath.Join(dir, c.file), []byte(old), 0o644); err != nil {
						t.Fatal(err)
					}
					before[c.file] = old
				}
				args := append(slices.Clone(outputsInterp), c.flag, c.file)
				// No file may grow past 0 bytes: every write of the run fails.
				_, stderr, code := outputsRun{args: args, dir: dir, fsize: 0}.run(t)
				failsWithOneLine(t, args, stderr, code, c.flag+": write "+c.file+": file too large")
				sameContents(t, args, dir, before)
			})
		}
	}
}

func TestOutputsReportNotWrittenWhenOutputsFail(t *testing.T) {
	dir := t.TempDir()
	const old = `{"workload": "an earlier run"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "r.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	// 16 KiB: room for the report and the CPU profile (about 2 KB each),
	// not for the results of 20,000 queries.
	args := []string{"interp", "--points", "20000", "--interpolants", "8", "--grid", "64", "--quiet",
		"--out", "q.npy", "--report", "r.json", "--cpuprofile", "cpu.prof"}
	_, stderr, code := outputsRun{args: args, dir: dir, fsize: 32}.run(t)
	failsWithOneLine(t, args, stderr, code, "--out: write q.npy: file too large")
	sameContents(t, args, dir, map[string]string{"r.json": old})
}

func TestOutputsRefusedRunLeavesNoFile(t *testing.T) {
	cases := [][]string{
		outputsInterp, // refused when the table is made
		outputsDRR,    // refused by the planner, in the run
		outputsWavelet,
	}
	for _, base := range cases {
		t.Run(base[0], func(t *testing.T) {
			dir := t.TempDir()
			args := append(slices.Clone(base), "--mem-limit", "1KiB", "--trace", "t.trace", "--report", "r.json",
				"--cpuprofile", "cpu.prof", "--memprofile", "mem.prof")
			_, stderr, code := outputsRun{args: args, dir: dir, fsize: -1}.run(t)
			failsWithOneLine(t, args, stderr, code, "memory limit")
			sameContents(t, args, dir, map[string]string{})
		})
	}
}

func TestOutputsGoodRunWritesProfiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"cpu.prof", "mem.prof", "t.trace", "r.json"} { // overwritten by a good run
		if err := os.WriteFile(filepath.Join(dir, name), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append(slices.Clone(outputsInterp), "--cpuprofile", "cpu.prof", "--memprofile", "mem.prof", "--trace", "t.trace", "--report", "r.json")
	stdout, stderr, code := outputsRun{args: args, dir: dir, fsize: -1}.run(t)
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "interp: sum of sumsq over 2000 queries") {
		t.Fatalf("tapeloop %s: exit status %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
	}
	got := dirContents(t, dir)
	if len(got) != 4 {
		t.Errorf("files after the run: %v, want the four outputs only", keys(got))
	}
	for _, name := range []string{"cpu.prof", "mem.prof"} { // gzipped protocol buffers
		zr, err := gzip.NewReader(strings.NewReader(got[name]))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		b, err := io.ReadAll(zr)
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %d bytes after gunzip, %v", name, len(b), err)
		}
	}
	if tr := got["t.trace"]; !strings.HasPrefix(tr, "go 1.") || len(tr) < 1000 {
		t.Errorf("t.trace: %d bytes starting %q, want an execution trace", len(tr), tr[:min(len(tr), 16)])
	}
	var rep struct {
		Workload string `json:"workload"`
		Items    int    `json:"items"`
	}
	if err := json.Unmarshal([]byte(got["r.json"]), &rep); err != nil || rep.Workload != "interp" || rep.Items != 2000 {
		t.Errorf("r.json: %+v, %v", rep, err)
	}
}

// TestOutputsFullFileSystem runs on a tmpfs left with no free space:
// root only, where mounting works.
func TestOutputsFullFileSystem(t *testing.T) {
	dir := mountTmpfs(t, 256<<10)
	before := map[string]string{"t.trace": "an earlier trace\n", "r.json": "{}\n"}
	for name, b := range before {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Fill what is left.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			break
		}
	}
	f.Close()
	filler, err := os.ReadFile(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	before["filler"] = string(filler)
	for _, extra := range [][]string{{"--trace", "t.trace"}, {"--report", "r.json"}, {"--out", "q.npy"}} {
		args := append(slices.Clone(outputsInterp), extra...)
		_, stderr, code := outputsRun{args: args, dir: dir, fsize: -1}.run(t)
		failsWithOneLine(t, args, stderr, code, "space") // --out is refused up front: not enough disk space
		sameContents(t, args, dir, before)
	}
	// The wavelet's CSV and a response to save are refused before any
	// work: no checkpoint is left either.
	wav := []string{"wavelet", "--quiet", "--size", "8x8x8", "--theta", "0,1", "--phi", "0", "--xi", "1"}
	for _, extra := range [][]string{{"--out", "w.csv"}, {"--save-response", "0,0,1:g.npy"}} {
		args := append(slices.Clone(wav), extra...)
		_, stderr, code := outputsRun{args: args, dir: dir, fsize: -1}.run(t)
		failsWithOneLine(t, args, stderr, code, "not enough disk space")
		sameContents(t, args, dir, before)
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory until the
// test ends: root only, where mounting works.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// The wavelet's outputs are set against the free space together, and the
// CSV, whose size is known only once written, by what it takes at least:
// a sweep whose CSV fits runs, however close, and responses that fit one
// by one but not together are refused before any work.
func TestOutputsWaveletSpace(t *testing.T) {
	// 3,000 combinations of a round hat: one kernel, a CSV of about 400 kB.
	sweep := []string{"wavelet", "--quiet", "--size", "5x4x3", "--theta", "0:pi:60", "--phi", "0:pi:50", "--xi", "1", "--out", "w.csv"}
	ref := t.TempDir()
	if _, stderr, code := (outputsRun{args: sweep, dir: ref, fsize: -1}).run(t); code != 0 {
		t.Fatalf("tapeloop %s: exit status %d: %s", strings.Join(sweep, " "), code, stderr)
	}
	want, err := os.ReadFile(filepath.Join(ref, "w.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// Room for the CSV and a little more: a bound of a full float64 per
	// value (25 bytes) would refuse it.
	if cols := 7; 25*cols*3001 <= len(want)+(64<<10) {
		t.Fatalf("the CSV (%d bytes) is too close to the bound of a full float64 a value to tell", len(want))
	}
	dir := mountTmpfs(t, len(want)+(64<<10))
	_, stderr, code := outputsRun{args: sweep, dir: dir, fsize: -1}.run(t)
	if code != 0 {
		t.Fatalf("tapeloop %s with %d bytes free for a CSV of %d: exit status %d: %s", strings.Join(sweep, " "), len(want)+(64<<10), len(want), code, stderr)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "w.csv")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the CSV written on the small file system differs from the one written elsewhere (%d bytes against %d; %v)", len(got), len(want), err)
	}
	os.Remove(filepath.Join(dir, "w.csv"))

	// Two responses of 48³ float32 (442 kB each) fit 700 kB one at a
	// time, not together.
	dir = mountTmpfs(t, 700<<10)
	two := []string{"wavelet", "--quiet", "--size", "48x48x48", "--theta", "0,1", "--phi", "0", "--xi", "2",
		"--save-response", "0,0,2:g1.npy", "--save-response", "1,0,2:g2.npy"}
	_, stderr, code = outputsRun{args: two, dir: dir, fsize: -1}.run(t)
	failsWithOneLine(t, two, stderr, code, "g1.npy, g2.npy: not enough disk space: the outputs take")
	sameContents(t, two, dir, map[string]string{})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The matrix of a symmetric affinity run is written as its blocks finish,
// beside the next blocks: a write that fails partway stops the run with
// one line, and neither a partial matrix nor a temporary file is left; an
// earlier file of that name is kept.
func TestOutputsAffinityMatrixWriteFails(t *testing.T) {
	dir := t.TempDir()
	const old = "an earlier matrix\n"
	if err := os.WriteFile(filepath.Join(dir, "a.npy"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	// 1,500 images: a float32 matrix of 9 MB in blocks of 64 rows; the
	// file may not grow past 1 MiB (2,048 blocks of 512 bytes), so the
	// writes fail after a few blocks.
	args := []string{"affinity", "-n", "1500", "--height", "7", "--width", "9", "--block", "64", "--quiet", "--out", "a.npy"}
	_, stderr, code := outputsRun{args: args, dir: dir, fsize: 2048}.run(t)
	failsWithOneLine(t, args, stderr, code, "--out: write a.npy: file too large")
	sameContents(t, args, dir, map[string]string{"a.npy": old})
}
