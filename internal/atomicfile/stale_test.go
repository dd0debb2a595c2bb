package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// deadPID is the id of a process that has ended.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1) to take a dead process's id from")
	}
	return cmd.Process.Pid
}

// TestLiveTempOfAnotherNamespace: a writer whose temporary file is named
// after a process id that does not exist here (a run in another container
// of this host, with its own process ids) keeps its file while another
// process makes its first file in the directory, whether the writer's file
// is open or closed and waiting to be renamed; it commits whole.
func TestLiveTempOfAnotherNamespace(t *testing.T) {
	if os.Getenv("ATOMICFILE_WRITER") != "" {
		return // the writer runs in TestMain
	}
	for _, closed := range []bool{false, true} {
		t.Run(fmt.Sprintf("closed=%v", closed), func(t *testing.T) {
			defer swept.Clear()
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "ATOMICFILE_WRITER="+filepath.Join(dir, "big.npy"),
				"ATOMICFILE_WRITER_PID="+strconv.Itoa(deadPID(t)), "ATOMICFILE_WRITER_CLOSE="+strconv.FormatBool(closed))
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			if line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("writer said %q: %s", line, stderr.String())
			}
			swept.Clear() // this process's first file in dir, as another run's
			if err := WriteFile(filepath.Join(dir, "small.npy"), []byte("small")); err != nil {
				t.Fatal(err)
			}
			stdin.Close()
			io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the writer failed: %v: %s", err, stderr.String())
			}
			if b, err := os.ReadFile(filepath.Join(dir, "big.npy")); err != nil || string(b) != "big" {
				t.Errorf("big.npy holds %q (%v), want the writer's bytes", b, err)
			}
		})
	}
}

// writer, run by TestLiveTempOfAnotherNamespace in a process of its own:
// it writes a file named as by process ATOMICFILE_WRITER_PID, says
// "ready", and commits it when its standard input closes.
func writer() {
	pid, _ := strconv.Atoi(os.Getenv("ATOMICFILE_WRITER_PID"))
	processID = func() int { return pid }
	f, err := Create(os.Getenv("ATOMICFILE_WRITER"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f.WriteString("big")
	if os.Getenv("ATOMICFILE_WRITER_CLOSE") == "true" {
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	if os.Getenv("ATOMICFILE_WRITER_CLOSE") == "true" {
		err = f.Rename()
	} else {
		err = f.Commit()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func TestMain(m *testing.M) {
	if os.Getenv("ATOMICFILE_WRITER") != "" {
		writer()
	}
	os.Exit(m.Run())
}

// TestStaleTempRemovedOnceFree: a temporary file of a process gone,
// unlocked, is removed by the next first Create in its directory.
func TestStaleTempRemovedOnceFree(t *testing.T) {
	defer swept.Clear()
	dir := t.TempDir()
	stale := filepath.Join(dir, fmt.Sprintf(".x.npy.tmp-%s-%d-1", hostname(), deadPID(t)))
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Create(filepath.Join(dir, "y.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	if _, err := os.Stat(stale); err == nil {
		t.Error("the stale temporary file is still there")
	}
}

// TestWriteErrorNamesTheOutput: a failed commit names the file the user
// gave, not its temporary file.
func TestWriteErrorNamesTheOutput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.npy")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	os.Remove(f.Name()) // as another process might
	err = f.Commit()
	if err == nil || !strings.Contains(err.Error(), "write "+path+": ") || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("Commit: %v, want an error naming %s and no temporary file", err, path)
	}
	g, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Abort()
	g.File.Close()
	_, err = g.Write([]byte("x"))
	if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), ".tmp-") {
		t.Errorf("Write: %v, want an error naming %s and no temporary file", err, path)
	}
}

// TestNothingAfterRemovePending: a goroutine still making files when
// RemovePending runs (a process stopped by a signal) makes none after it:
// the directory made for the output is left empty and removed.
func TestNothingAfterRemovePending(t *testing.T) {
	defer restart()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if _, err := MakeDirs(out); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan bool)
	var stopped error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f, err := Create(filepath.Join(out, fmt.Sprintf("drr_%04d.png", i)))
			if err != nil {
				stopped = err
				<-stop
				return
			}
			f.WriteString("png")
			f.Close()
		}
	}()
	time.Sleep(50 * time.Millisecond)
	RemovePending()
	time.Sleep(50 * time.Millisecond) // the goroutine goes on, as the process does before it exits
	close(stop)
	wg.Wait()
	if !errors.Is(stopped, ErrStopped) {
		t.Errorf("Create after RemovePending: %v, want ErrStopped", stopped)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		names := []string{}
		if entries, err := os.ReadDir(out); err == nil {
			for _, e := range entries[:min(3, len(entries))] {
				names = append(names, e.Name())
			}
		}
		t.Errorf("left %v (%v) in the output's directory: %v…", entries, err, names)
	}
}
