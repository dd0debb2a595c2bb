package npy

// A file mapped with Map can be truncated by another process while it is
// read. The kernel then answers a read of a page past the new end with
// SIGBUS, and the reads happen both in Go and in C kernels called through
// cgo (the affinity's pairwise kernels read the images straight from the
// mapping). A fault in Go code could be made a panic with
// runtime/debug.SetPanicOnFault, but only in the goroutine that faults and
// only around code that recovers; a fault inside C cannot be recovered by
// Go at all, and the runtime prints its trace and dies. Checking the size
// before each batch leaves the batch itself exposed.
//
// So the process handles SIGBUS itself, in front of the Go runtime's
// handler, for the mapped ranges only: a fault there replaces the mapping
// from the faulting page to its end with zero pages (the read that faulted
// then completes, in Go or in C, without a trace), and wakes a goroutine
// that reports the file and ends the process, removing its pending
// outputs first (see onFault). The faulting thread waits meanwhile (up to
// five seconds), so the batch it belongs to does not finish before the
// process ends, and no result computed from the zeros is written. SIGBUS outside the mapped ranges goes on to the
// handler installed before (the Go runtime's), as if this one were not
// there.

/*
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { npy_guards = 64 };

static _Atomic uintptr_t npy_lo[npy_guards], npy_hi[npy_guards];
static atomic_int npy_hit[npy_guards];
static struct sigaction npy_prev;
static int npy_wake = -1;
static uintptr_t npy_page = 4096;

// How long a faulting thread waits for the process to end before it goes
// on reading zeros (the report still ends the process).
static _Atomic int npy_stall_ms = 5000;

static void npy_set_stall(int ms) { atomic_store(&npy_stall_ms, ms); }

// npy_sum adds up n bytes at p: a read of mapped data in C, for the tests.
static uint64_t npy_sum(const unsigned char *p, size_t n) {
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++) {
		s += ((const volatile unsigned char *)p)[i];
	}
	return s;
}

static void npy_onbus(int sig, siginfo_t *si, void *uc) {
	int saved = errno;
	if (si != NULL && si->si_code > 0) { // raised by the kernel, not sent
		uintptr_t a = (uintptr_t)si->si_addr;
		for (int i = 0; i < npy_guards; i++) {
			uintptr_t lo = atomic_load(&npy_lo[i]), hi = atomic_load(&npy_hi[i]);
			if (lo == 0 || a < lo || a >= hi) {
				continue;
			}
			uintptr_t p = a & ~(npy_page - 1), end = (hi + npy_page - 1) & ~(npy_page - 1);
			if (mmap((void *)p, end - p, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
				break;
			}
			if (atomic_exchange(&npy_hit[i], 1) == 0) {
				unsigned char b = (unsigned char)i;
				ssize_t n = write(npy_wake, &b, 1);
				(void)n;
			}
			struct timespec ms = {0, 1000000};
			int stall = atomic_load(&npy_stall_ms);
			for (int k = 0; k < stall; k++) {
				nanosleep(&ms, NULL);
			}
			errno = saved;
			return;
		}
	}
	errno = saved;
	if (npy_prev.sa_flags & SA_SIGINFO) {
		// The Go runtime's handler runs with every signal blocked, as
		// when the kernel calls it; returning restores the mask.
		sigset_t all;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, NULL);
		npy_prev.sa_sigaction(sig, si, uc);
		return;
	}
	if (npy_prev.sa_handler != SIG_DFL && npy_prev.sa_handler != SIG_IGN) {
		npy_prev.sa_handler(sig);
		return;
	}
	signal(SIGBUS, SIG_DFL); // the read faults again, to the default action
}

static int npy_install(int wake) {
	npy_wake = wake;
	long pg = sysconf(_SC_PAGESIZE);
	if (pg > 0) {
		npy_page = (uintptr_t)pg;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = npy_onbus;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, &npy_prev);
}

// npy_guard watches [lo, hi) and returns its slot, or -1 when every slot
// is taken.
static int npy_guard(uintptr_t lo, uintptr_t hi) {
	for (int i = 0; i < npy_guards; i++) {
		if (atomic_load(&npy_lo[i]) == 0) {
			atomic_store(&npy_hit[i], 0);
			atomic_store(&npy_hi[i], hi);
			atomic_store(&npy_lo[i], lo);
			return i;
		}
	}
	return -1;
}

static void npy_unguard(int i) {
	atomic_store(&npy_lo[i], 0);
	atomic_store(&npy_hi[i], 0);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"unsafe"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
)

// ErrTruncated is matched (errors.Is) by the report of a mapped file that
// lost its data while it was read.
var ErrTruncated = errors.New("the file was truncated while being read")

// guarded is a mapping watched for faults.
type guarded struct {
	name string   // the file as messages name it
	f    *os.File // kept open to tell a truncation from a read error
	size int64    // the bytes mapped
}

var guards struct {
	sync.Mutex
	slots   [C.npy_guards]*guarded
	names   map[string]string // NameInput's names, by path
	once    sync.Once
	wake    *os.File // the handler's end of the pipe, kept open
	initErr error
}

// onFault is called, in its own goroutine, with the error describing a
// fault on a mapped file. It ends the process as a stop by signal does: the
// pending outputs removed, one line on standard error, exit status 1.
// Tests replace it.
var onFault = func(err error) {
	atomicfile.RemovePending()
	fmt.Fprintf(os.Stderr, "tapeloop: %v\n", err)
	os.Exit(1)
}

// NameInput says how messages about a later mapping of the input at path
// name the file, e.g. "--images big.npy". A fault is reported by the
// process, not returned to the caller, so the caller cannot add the flag to
// it: it is named up front.
func NameInput(path, name string) {
	guards.Lock()
	defer guards.Unlock()
	if guards.names == nil {
		guards.names = map[string]string{}
	}
	guards.names[filepath.Clean(path)] = name
}

// guard watches the mapping mem of the file f (opened at path) for faults,
// installing the handler on first use. It returns the slot to give to
// unguard, or ok == false when the handler cannot be installed or too many
// files are mapped: the caller then reads the file instead.
func guard(mem []byte, f *os.File, path string) (slot int, ok bool) {
	guards.once.Do(func() {
		r, w, err := os.Pipe()
		if err != nil {
			guards.initErr = err
			return
		}
		if rc, err := C.npy_install(C.int(w.Fd())); rc != 0 {
			r.Close()
			w.Close()
			guards.initErr = err
			return
		}
		guards.wake = w
		go watch(r)
	})
	if guards.initErr != nil || len(mem) == 0 {
		return -1, false
	}
	var dup *os.File // the size is not checked without it: a fault is reported as a truncation
	if fd, err := syscall.Dup(int(f.Fd())); err == nil {
		syscall.CloseOnExec(fd)
		dup = os.NewFile(uintptr(fd), path)
	}
	guards.Lock()
	defer guards.Unlock()
	name := path
	if n, ok := guards.names[filepath.Clean(path)]; ok {
		name = n
	}
	lo := uintptr(unsafe.Pointer(&mem[0]))
	i := int(C.npy_guard(C.uintptr_t(lo), C.uintptr_t(lo+uintptr(len(mem)))))
	if i < 0 {
		if dup != nil {
			dup.Close()
		}
		return -1, false
	}
	guards.slots[i] = &guarded{name: name, f: dup, size: int64(len(mem))}
	return i, true
}

// unguard stops watching slot i, before its mapping is removed.
func unguard(i int) {
	C.npy_unguard(C.int(i))
	guards.Lock()
	defer guards.Unlock()
	if g := guards.slots[i]; g != nil && g.f != nil {
		g.f.Close()
	}
	guards.slots[i] = nil
}

// watch waits for the handler's word of a fault and reports it.
func watch(r *os.File) {
	var b [1]byte
	for {
		if _, err := r.Read(b[:]); err != nil {
			return
		}
		guards.Lock()
		g := guards.slots[int(b[0])%len(guards.slots)]
		guards.Unlock()
		if g != nil {
			go onFault(g.fault())
		}
	}
}

// fault describes a fault on g: a truncation when the file is now shorter
// than its mapping, else a read error.
func (g *guarded) fault() error {
	if g.f != nil {
		if st, err := g.f.Stat(); err == nil && st.Size() >= g.size {
			return fmt.Errorf("%s: the file could not be read (an input/output error in its mapped data)", g.name)
		}
	}
	return fmt.Errorf("%s: %w", g.name, ErrTruncated)
}

// sumC adds up b's bytes in C code: the tests read a mapping from C
// through it, as the kernels do.
func sumC(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(C.npy_sum((*C.uchar)(unsafe.Pointer(&b[0])), C.size_t(len(b))))
}

// setStall sets how long, in milliseconds, a thread that faulted on a
// mapping waits for the process to end.
func setStall(ms int) { C.npy_set_stall(C.int(ms)) }
