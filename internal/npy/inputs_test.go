package npy

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

var sink byte

// writeF32 writes an (n,) float32 .npy file of ones at path.
func writeF32(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := NewWriter(f, Float32, []int{n})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	if err := w.Write32(x); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// hangAfter is how long a call that should return at once may block before
// a test calls it hung: far beyond what a loaded machine takes.
const hangAfter = 2 * time.Minute

// within runs f and fails if it hangs (a FIFO that blocks the open would
// hang it forever): still blocked after hangAfter.
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(hangAfter):
		t.Fatalf("hung: still blocked after %v", hangAfter)
	}
}

func TestInputsNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "f.npy")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	sub := filepath.Join(dir, "d.npy")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{fifo, fifo + ": not a regular file (a pipe or FIFO): "},
		{"/dev/zero", "/dev/zero: not a regular file (a character device): "},
		{"/dev/urandom", "/dev/urandom: not a regular file (a character device): "},
		{sub, sub + ": not a regular file: it is a directory; name a file"},
		{"-", "-: not a regular file: standard input is not read: "},
	}
	opens := map[string]func(string) error{
		"OpenFile": func(p string) error {
			f, err := OpenFile(p)
			if err == nil {
				f.Close()
			}
			return err
		},
		"Open": func(p string) error {
			f, err := Open(p)
			if err == nil {
				f.Close()
			}
			return err
		},
		"OpenNPZ": func(p string) error {
			z, err := OpenNPZ(p)
			if err == nil {
				z.Close()
			}
			return err
		},
		"ReadAll64": func(p string) error { _, _, err := ReadAll64(p); return err },
		"Map": func(p string) error {
			m, ok, err := Map[float32](p)
			if ok {
				m.Close()
				return errors.New("mapped")
			}
			return err
		},
	}
	for name, open := range opens {
		for _, c := range cases {
			var err error
			within(t, func() { err = open(c.path) })
			switch {
			case !errors.Is(err, ErrNotRegular):
				t.Errorf("%s(%s): %v, want an error matching ErrNotRegular", name, c.path, err)
			case !strings.HasPrefix(err.Error(), c.want):
				t.Errorf("%s(%s): %q, want it to start %q", name, c.path, err, c.want)
			case strings.Contains(err.Error(), "\n"):
				t.Errorf("%s(%s): %q is not one line", name, c.path, err)
			}
		}
	}
}

// /dev/stdin redirected from a file is that file, and is read.
func TestInputsStdinFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.npy")
	writeF32(t, p, 10)
	in, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	// /dev/fd/N is what /dev/stdin links to, for descriptor 0.
	fdPath := "/dev/fd/" + strconv.Itoa(int(in.Fd()))
	if _, err := os.Stat(fdPath); err != nil {
		t.Skip("no /dev/fd here:", err)
	}
	_, x, err := ReadAll64(fdPath)
	if err != nil || len(x) != 10 || x[9] != 1 {
		t.Fatalf("ReadAll64(%s) = %v, %v; want ten ones", fdPath, x, err)
	}
}

// faults replaces the report of a fault for the test's length, and lets
// the faulting thread go on at once.
func faults(t *testing.T) <-chan error {
	t.Helper()
	ch := make(chan error, 4)
	old := onFault
	onFault = func(err error) { ch <- err }
	setStall(0)
	t.Cleanup(func() { onFault = old; setStall(5000) })
	return ch
}

// A mapped file truncated under a reader in Go and in C: the reads that
// find the data gone get zeros instead of a crash, and the fault is
// reported once, naming the file as NameInput said.
func TestInputsTruncatedWhileMapped(t *testing.T) {
	for _, in := range []string{"go", "c"} {
		t.Run(in, func(t *testing.T) {
			ch := faults(t)
			p := filepath.Join(t.TempDir(), "big.npy")
			const n = 1 << 20 // 4 MiB of data: many pages
			writeF32(t, p, n)
			NameInput(p, "--images "+p)
			m, ok, err := Map[float32](p)
			if err != nil || !ok {
				t.Fatalf("Map: %v, %v", ok, err)
			}
			defer m.Close()
			sum := func() float64 {
				if in == "c" {
					b := unsafe.Slice((*byte)(unsafe.Pointer(&m.Data[0])), 4*len(m.Data))
					return float64(sumC(b)) / float64(sumC(b[:4]))
				}
				s := 0.0
				for _, v := range m.Data {
					s += float64(v)
				}
				return s
			}
			whole := sum()
			if err := os.Truncate(p, 4096); err != nil {
				t.Fatal(err)
			}
			var after float64
			within(t, func() { after = sum() })
			if after >= whole || after <= 0 {
				t.Errorf("sum after truncation %g, before %g: want less, and the data left still read", after, whole)
			}
			select {
			case err := <-ch:
				want := "--images " + p + ": the file was truncated while being read"
				if !errors.Is(err, ErrTruncated) || err.Error() != want {
					t.Errorf("reported %q, want %q", err, want)
				}
			case <-time.After(hangAfter):
				t.Fatalf("hung: no report of the fault after %v", hangAfter)
			}
			within(t, func() { sum() })
			select {
			case err := <-ch:
				t.Errorf("reported twice: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}

// A fault outside the mapped files still goes to the Go runtime, which
// with SetPanicOnFault makes it a panic the faulting goroutine recovers.
func TestInputsOtherFaultsReachGo(t *testing.T) {
	faults(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "a.npy")
	writeF32(t, p, 10)
	m, ok, err := Map[float32](p) // installs the handler
	if err != nil || !ok {
		t.Fatalf("Map: %v, %v", ok, err)
	}
	defer m.Close()
	q := filepath.Join(dir, "other")
	if err := os.WriteFile(q, make([]byte, 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 1<<16, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if err := os.Truncate(q, 0); err != nil {
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var got any
	func() {
		defer func() { got = recover() }()
		sink = mem[1<<15]
	}()
	re, ok := got.(runtime.Error)
	if !ok {
		t.Fatalf("recovered %v, want a runtime.Error", got)
	}
	if a, ok := re.(interface{ Addr() uintptr }); !ok || a.Addr() == 0 {
		t.Errorf("recovered %v, want the fault's address", re)
	}
}
