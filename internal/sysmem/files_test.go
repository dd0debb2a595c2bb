package sysmem

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestWithFileLimit runs out of file descriptors under a low ulimit -n
// and checks that the error names the limit, once, and still matches
// EMFILE; other errors pass through unchanged.
func TestWithFileLimit(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	// The limit: a few above what is open now, so that opening runs out.
	dir, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	limit := uint64(len(dir) + 4)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: limit, Max: old.Max}); err != nil {
		t.Skip(err)
	}
	var openErr error
	for range 64 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			openErr = err
			break
		}
		held = append(held, f)
	}
	err = WithFileLimit(fmt.Errorf("--out: create x.npy: %w", openErr)) // under the limit, as in a run
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if openErr == nil {
		t.Fatalf("opened 64 files under ulimit -n %d", limit)
	}
	want := fmt.Sprintf("too many open files (ulimit -n %d): raise it with ulimit -n", limit)
	msg := err.Error()
	if !strings.HasPrefix(msg, "--out: create x.npy: open /dev/null: ") || !strings.HasSuffix(msg, want) || strings.Count(msg, "ulimit -n") != 2 {
		t.Errorf("error %q, want the open error ending %q", msg, want)
	}
	if !errors.Is(err, syscall.EMFILE) {
		t.Error("the error no longer matches EMFILE")
	}
	if again := WithFileLimit(fmt.Errorf("run: %w", err)); strings.Count(again.Error(), "(ulimit -n") != 1 {
		t.Errorf("wrapped twice: %q", again)
	}
	// Words after the cause stay after the hint.
	more := WithFileLimit(fmt.Errorf("%w; 3 of 9 kernels done", syscall.EMFILE)).Error()
	if !strings.HasPrefix(more, "too many open files (ulimit -n ") || !strings.HasSuffix(more, "raise it with ulimit -n; 3 of 9 kernels done") {
		t.Errorf("error %q", more)
	}
	other := errors.New("disk full")
	if WithFileLimit(other) != other || WithFileLimit(nil) != nil || WithFileLimit(syscall.ENFILE) != syscall.ENFILE {
		t.Error("an error other than EMFILE is changed")
	}
}
