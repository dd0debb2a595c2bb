package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The temporary files of live writers are told from those that killed
// processes left by locks, which the kernel drops when their holder ends,
// however it ends, and which hold across PID namespaces (two containers
// of one host sharing a directory, each with its own process ids):
//
//   - a writer holds an exclusive flock on each of its temporary files
//     while it is open;
//   - a writer holds a shared flock on a directory while it has temporary
//     files there (open or closed, waiting to be renamed);
//   - the first Create of a process in a directory removes stale files
//     only while it holds an exclusive flock on the directory, that is
//     while no other process writes there, and of those only the files
//     of this host whose own lock it can take and whose process is gone.
//
// Where the file system has no flock, the process's id alone tells, as it
// did before: the file of a process of this host that is gone is stale.

// dirLock is this process's shared lock on a directory where it has
// temporary files: n of them.
type dirLock struct {
	f *os.File // nil: the directory could not be locked
	n int
}

func (l *dirLock) close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// lockWait is how long holdDir waits for a shared lock on a directory
// that another process is cleaning (a moment, normally) before it goes on
// without one.
const lockWait = 5 * time.Second

// holdDir counts one more temporary file of this process in dir (clean),
// taking the directory's shared lock for the first, after removing the
// stale files there (once per process). pending's lock is held.
func holdDir(dir, host string) {
	if l := pending.locks[dir]; l != nil {
		l.n++
		return
	}
	l := &dirLock{n: 1}
	if pending.locks == nil {
		pending.locks = map[string]*dirLock{}
	}
	pending.locks[dir] = l
	d, err := os.Open(dir)
	if err != nil {
		removeStale(dir, host, nil)
		return
	}
	removeStale(dir, host, d)
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		err := syscall.Flock(int(d.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			l.f = d
			return
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Since(start) > lockWait {
			d.Close()
			return
		}
	}
}

// releaseDir counts one temporary file of this process in dir fewer,
// dropping the directory's lock after the last. pending's lock is held.
func releaseDir(dir string) {
	l := pending.locks[dir]
	if l == nil {
		return
	}
	if l.n--; l.n <= 0 {
		l.close()
		delete(pending.locks, dir)
	}
}

// lockTemp takes the exclusive lock on a temporary file just made; a file
// system without flock leaves it unlocked (its process's id tells).
func lockTemp(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }

// processID is the process id that temporary files are named after (a
// variable: a test takes another's, as a process of another PID namespace
// has).
var processID = os.Getpid

// hostname is the host's name as it may appear in a file name.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, h)
}

// Sweep removes the temporary files in dir that killed processes of this
// host left (as the first Create in dir would), so that the free space of
// dir's file system can be counted without them.
func Sweep(dir string) {
	pending.Lock()
	defer pending.Unlock()
	d, err := os.Open(dir)
	if err != nil {
		removeStale(filepath.Clean(dir), hostname(), nil)
		return
	}
	defer d.Close()
	removeStale(filepath.Clean(dir), hostname(), d)
}

// swept holds the directories removeStale has cleaned.
var swept sync.Map

// removeStale removes, once per directory and process, the temporary files
// in dir written on host by processes no longer running. d is dir, open:
// the files are removed only while it is locked exclusively (the lock is
// left held, for the caller to share or to close); nil, or a file system
// without flock, leaves the files' own locks and processes to tell.
func removeStale(dir, host string, d *os.File) {
	if _, done := swept.LoadOrStore(dir, true); done {
		return
	}
	if d != nil {
		err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return // another process writes in dir: nothing there is stale for sure
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	mark := ".tmp-" + host + "-"
	for _, e := range entries {
		name := e.Name()
		i := strings.LastIndex(name, mark)
		if !strings.HasPrefix(name, ".") || i < 0 || !e.Type().IsRegular() {
			continue
		}
		pidStr, _, ok := strings.Cut(name[i+len(mark):], "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		removeIfDead(filepath.Join(dir, name), pid)
	}
}

// removeIfDead removes the temporary file path of process pid when no
// process holds its lock and pid is gone.
func removeIfDead(path string, pid int) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK) {
		return // its writer lives
	}
	if Gone(pid) {
		os.Remove(path)
	}
}

// Gone reports whether process pid of this host has ended: it does not
// exist, or it is a zombie (ended, not yet reaped by its parent; Linux's
// /proc tells).
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
