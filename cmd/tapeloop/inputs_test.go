package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// runInput runs tapeloop in dir with stdin and returns its stderr and exit
// status. A FIFO or a device read as a file would block or run on: a run
// still going after hangAfter is killed and the test fails saying it hung.
func runInput(t *testing.T, dir string, stdin io.Reader, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangAfter)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir, cmd.Stdin = dir, stdin
	cmd.Env = append(filterEnvPrefix(os.Environ(), "TAPELOOP_", "SLURM_", "JOB_COMPLETION_INDEX"), "TAPELOOP_MEM_LIMIT=1GiB")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tapeloop %s: hung: still running after %v (killed); stderr %q", strings.Join(args, " "), hangAfter, tail(se.String()))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return se.String(), code
}

// refused checks a run ended with status 1 and one "tapeloop: " line
// containing want, and no trace.
func refused(t *testing.T, args []string, msg string, code int, want string) {
	t.Helper()
	cmdline := strings.Join(args, " ")
	switch {
	case code != 1:
		t.Errorf("tapeloop %s: exit status %d, want 1; stderr %q", cmdline, code, tail(msg))
	case strings.Contains(msg, "goroutine") || strings.Contains(msg, "panic") || strings.Contains(msg, "fatal error") || strings.Contains(msg, "SIGBUS"):
		t.Errorf("tapeloop %s: crashed: %q", cmdline, tail(msg))
	case !strings.HasPrefix(msg, "tapeloop: ") || strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n"):
		t.Errorf("tapeloop %s: stderr is not one 'tapeloop: ' line: %q", cmdline, tail(msg))
	case !strings.Contains(msg, want):
		t.Errorf("tapeloop %s: message %q does not say %q", cmdline, msg, want)
	}
}

// Every input flag of every workload, and merge's shards, given a FIFO
// that no one writes, a device that never ends, a directory or "-": each
// is refused at once, in one line naming the flag and saying why, and
// nothing is written.
func TestInputsNotRegular(t *testing.T) {
	other := t.TempDir() // the FIFOs live outside the run's directory
	fifo := func(name string) string {
		p := filepath.Join(other, name)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip("no FIFOs here:", err)
		}
		return p
	}
	fNpy, xNpy, imgNpy, volNpy, volNii, geo, shardNpz := fifo("f.npy"), fifo("x.npy"), fifo("img.npy"), fifo("vol.npy"), fifo("vol.nii"), fifo("geo.json"), fifo("s.npz")
	const why = ": not a regular file (a pipe or FIFO): tapeloop reads inputs as files of a known size, which it maps or seeks; save the data to a file first"
	const dev = ": not a regular file (a character device): "
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"interp", "--f", fNpy, "--points", "10"}, "--f " + fNpy + why},
		{[]string{"interp", "--x", xNpy}, "--x " + xNpy + why},
		{[]string{"affinity", "--images", imgNpy}, "--images " + imgNpy + why},
		{[]string{"affinity", "--images", imgNpy, "--topk", "2", "--out", "nn.npz"}, "--images " + imgNpy + why},
		{[]string{"drr", "--volume", volNpy, "--orbit", "2", "--detector", "4x4"}, "--volume " + volNpy + why},
		{[]string{"drr", "--volume", volNii, "--orbit", "2", "--detector", "4x4", "--out", "o"}, "--volume " + volNii + why},
		{[]string{"drr", "--volume", volNpy, "--series", "1.2.3"}, "--volume " + volNpy + why},
		{[]string{"drr", "--size", "8", "--geometry", geo}, "--geometry " + geo + why},
		{[]string{"wavelet", "--volume", volNpy, "--theta", "0", "--phi", "0", "--xi", "1"}, "--volume " + volNpy + why},
		{[]string{"merge", "--out", "m.npy", shardNpz}, shardNpz + why},
		{[]string{"merge", "--out", "m.npy", "s0.npz", shardNpz}, shardNpz + why},
		{[]string{"affinity", "--images", "/dev/zero"}, "--images /dev/zero" + dev},
		{[]string{"interp", "--x", "/dev/urandom"}, "--x /dev/urandom" + dev},
		{[]string{"drr", "--volume", "/dev/zero", "--shape", "4,4,4", "--dtype", "uint8", "--orbit", "2", "--detector", "4x4"}, "--volume /dev/zero" + dev},
		{[]string{"drr", "--size", "8", "--geometry", "/dev/urandom"}, "--geometry /dev/urandom" + dev},
		{[]string{"wavelet", "--volume", "/dev/zero", "--theta", "0", "--phi", "0", "--xi", "1"}, "--volume /dev/zero" + dev},
		{[]string{"merge", "--out", "m.npy", "/dev/zero"}, "/dev/zero: shard files are .npz archives"},
		// Standard input: "-" is not read; /dev/stdin here is /dev/null.
		{[]string{"affinity", "--images", "-"}, "--images -: not a regular file: standard input is not read: tapeloop reads inputs as files"},
		{[]string{"interp", "--x", "/dev/stdin"}, "--x /dev/stdin" + dev},
		// A directory where a file is wanted.
		{[]string{"interp", "--f", "d", "--points", "10"}, "d: not a regular file: it is a directory; name a file"},
		{[]string{"affinity", "--images", "d"}, "d: not a regular file: it is a directory; name a file"},
		{[]string{"wavelet", "--volume", "d.npy", "--theta", "0", "--phi", "0", "--xi", "1"}, "d.npy holds no DICOM image files"}, // a directory is a DICOM series
		{[]string{"merge", "--out", "m.npy", "s0.npz", "d.npz"}, "d.npz: not a regular file: it is a directory; name a file"},
	}
	s0 := shardOf(shardMeta(0, 2, 0, 2), 2)
	for _, c := range cases {
		dir := t.TempDir()
		for _, d := range []string{"d", "d.npy", "d.npz"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "s0.npz"), s0, 0o644); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, dir)
		msg, code := runInput(t, dir, nil, c.args...)
		refused(t, c.args, msg, code, c.want)
		after := snapshot(t, dir)
		if len(after) != len(before) {
			t.Errorf("tapeloop %s: files before %d, after %d", strings.Join(c.args, " "), len(before), len(after))
		}
	}
}

// /dev/stdin redirected from a .npy file is that file, read as the path
// itself is; fed through a pipe, it is refused, saying why.
func TestInputsStdin(t *testing.T) {
	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	writeNpy(t, x, []int{5}, []float64{0, 0.1, 0.2, 0.3, 0.4})
	want, _, code := run(t, "interp", "--quiet", "--x", x)
	if code != 0 {
		t.Fatalf("interp --x %s: exit status %d", x, code)
	}
	f, err := os.Open(x)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(binary, "interp", "--quiet", "--x", "/dev/stdin")
	cmd.Stdin = f
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("interp --x /dev/stdin < x.npy: %v; stderr %q", err, se.String())
	}
	if so.String() != want {
		t.Errorf("interp --x /dev/stdin < x.npy printed %q, with the file %q", so.String(), want)
	}

	b, err := os.ReadFile(x)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"interp", "--quiet", "--x", "/dev/stdin"}
	msg, code := runInput(t, dir, bytes.NewReader(b), args...)
	refused(t, args, msg, code, "--x /dev/stdin: not a regular file (a pipe or FIFO): tapeloop reads inputs as files")
}

// writeImages writes an (n, d) float32 .npy file of uniform values.
func writeImages(t *testing.T, path string, n, d int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := npy.NewWriter(f, npy.Float32, []int{n, d})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	row := make([]float32, d)
	for range n {
		for i := range row {
			row[i] = rng.Float32()
		}
		if err := w.Write32(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// The images, memory-mapped, truncated by another process while the run
// reads them: one line naming the file, status 1, no trace, and nothing
// left in the output directory.
func TestInputsTruncatedWhileRunning(t *testing.T) {
	for _, mode := range []struct{ name, out string }{
		{"topk", "--topk=5"},
		{"matrix", ""},
	} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			// 5,000 images of 1,024 values (20 MB) in blocks of 8 rows:
			// hundreds of batches, seconds of work, each batch reading
			// every image from the mapping in the C kernels.
			writeImages(t, filepath.Join(dir, "big.npy"), 5000, 1024)
			outDir := filepath.Join(dir, "out")
			if err := os.Mkdir(outDir, 0o755); err != nil {
				t.Fatal(err)
			}
			out := "out/m.npy"
			args := []string{"affinity", "--quiet", "--images", "big.npy", "--block", "8", "--out", out}
			if mode.out != "" {
				args = append(args, mode.out)
				args[len(args)-2] = "out/nn.npz"
			}
			ctx, cancel := context.WithTimeout(context.Background(), hangAfter)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, args...)
			cmd.Dir = dir
			cmd.Env = append(filterEnvPrefix(os.Environ(), "TAPELOOP_", "SLURM_", "JOB_COMPLETION_INDEX"), "TAPELOOP_MEM_LIMIT=1GiB")
			var se bytes.Buffer
			cmd.Stderr = &se
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The output's temporary file appears once the images are
			// mapped and checked; the batches follow. Stop the run a
			// moment later, truncate the images and let it go on.
			deadline := time.Now().Add(hangAfter)
			for {
				ents, _ := os.ReadDir(outDir)
				if len(ents) > 0 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("hung: no temporary output after %v", hangAfter)
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatalf("the run ended before the truncation (%v): make it longer", err)
			}
			if err := os.Truncate(filepath.Join(dir, "big.npy"), 1<<20); err != nil {
				t.Fatal(err)
			}
			cmd.Process.Signal(syscall.SIGCONT)
			err := cmd.Wait()
			if ctx.Err() != nil {
				t.Fatalf("hung: still running after the truncation (killed %v after its start): %q", hangAfter, tail(se.String()))
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			refused(t, args, se.String(), code, "")
			if want := "tapeloop: --images big.npy: the file was truncated while being read\n"; se.String() != want {
				t.Errorf("stderr %q, want %q", tail(se.String()), want)
			}
			ents, err := os.ReadDir(outDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				t.Errorf("left in the output directory: %s", e.Name())
			}
		})
	}
}

// Outputs that are not files: a FIFO, a device, standard output (as
// /dev/stdout or "-"), each given to --out or --report, is refused at
// once, in one line naming the flag and saying why, and left as it was (a
// file renamed over it would replace it). An output that is a symbolic
// link has the file it leads to written, and stays a link.
func TestOutputsNotFiles(t *testing.T) {
	dir := t.TempDir()
	writeImages(t, filepath.Join(dir, "img.npy"), 9, 13)
	fifo, fifoNpz := filepath.Join(dir, "out.fifo"), filepath.Join(dir, "nn.npz")
	for _, p := range []string{fifo, fifoNpz} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip("no FIFOs here:", err)
		}
	}
	const why = ": tapeloop writes each output to a temporary file beside it and renames it into place when the run succeeds; name a file"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--out", fifo}, "--out " + fifo + ": is a pipe or FIFO" + why},
		{[]string{"--out", "/dev/null"}, "--out /dev/null: is a character device" + why},
		{[]string{"--out", "/dev/stdout"}, "--out /dev/stdout: leads to an open file of a process (/proc), such as standard output" + why},
		{[]string{"--report", "/dev/stdout"}, "--report /dev/stdout: leads to an open file of a process"},
		{[]string{"--out", "-"}, "--out -: standard output is not written to" + why},
		{[]string{"--topk", "2", "--out", fifoNpz}, "--out " + fifoNpz + ": is a pipe or FIFO" + why},
	}
	for _, c := range cases {
		args := append([]string{"affinity", "--images", "img.npy"}, c.args...)
		msg, code := runInput(t, dir, nil, args...)
		refused(t, args, msg, code, c.want)
	}
	for p, kind := range map[string]os.FileMode{fifo: os.ModeNamedPipe, fifoNpz: os.ModeNamedPipe, "/dev/null": os.ModeCharDevice} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&kind == 0 {
			t.Errorf("%s changed: %v %v", p, fi, err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("results/a.npy", filepath.Join(dir, "latest.npy")); err != nil {
		t.Fatal(err)
	}
	if msg, code := runInput(t, dir, nil, "affinity", "--images", "img.npy", "--out", "latest.npy"); code != 0 {
		t.Fatalf("--out latest.npy (a link): status %d: %s", code, msg)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "latest.npy")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("latest.npy is no longer a link: %v %v", fi, err)
	}
	r, err := npy.Open(filepath.Join(dir, "results", "a.npy"))
	if err != nil {
		t.Fatalf("the file the link leads to: %v", err)
	}
	defer r.Close()
	if len(r.Shape) != 2 || r.Shape[0] != 9 || r.Shape[1] != 9 {
		t.Errorf("results/a.npy has shape %v, want (9, 9)", r.Shape)
	}
}
