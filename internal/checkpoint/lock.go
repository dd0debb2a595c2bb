package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
)

// A Lock is held by the process writing a checkpoint and its run's
// output: a file beside the checkpoint, locked with flock(2) and holding
// the process's pid and host. The kernel drops the lock when the process
// ends, however it ends, so a lock file left by a killed run holds
// nothing back; a live run's is refused at once, naming its pid.
type Lock struct {
	f    *os.File
	path string
}

// held holds the locks this process holds, for CloseAll.
var held struct {
	sync.Mutex
	locks map[*Lock]bool
}

// ErrSymlink is wrapped by the error about a lock file or checkpoint that
// is a symbolic link: tapeloop's own files beside an output are never
// followed through one.
var ErrSymlink = errors.New("is a symbolic link, which tapeloop does not follow")

// ErrLocked is wrapped by Lock's error when another process holds the lock.
var ErrLocked = errors.New("another tapeloop run is writing this output")

// LockPath is the lock file of the checkpoint at path.
func LockPath(path string) string { return strings.TrimSuffix(path, ".ckpt") + ".lock" }

// Take locks the checkpoint at path (its file need not exist), or fails
// at once with ErrLocked when another process holds it. On a file system
// without flock the Lock returned holds nothing.
func Take(path string) (*Lock, error) {
	lp := LockPath(path)
	for range 10 {
		f, err := openLock(lp)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			owner := readOwner(f)
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w (%s, lock %s): wait for it to end, or stop it", ErrLocked, owner, lp)
			}
			if errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL) {
				os.Remove(lp) // a file system without flock: the run goes on unlocked
				return &Lock{}, nil
			}
			return nil, fmt.Errorf("lock %s: %w", lp, err)
		}
		// The file may have been removed, by the run that held it, between
		// our open and our lock: then ours locks nothing; try again.
		var a, b syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &a) != nil || syscall.Stat(lp, &b) != nil || a.Ino != b.Ino || a.Dev != b.Dev {
			f.Close()
			continue
		}
		host, _ := os.Hostname()
		f.Truncate(0)
		if _, err := f.WriteAt([]byte(fmt.Sprintf("%d %s\n", os.Getpid(), host)), 0); err != nil {
			f.Close()
			os.Remove(lp)
			return nil, fmt.Errorf("lock %s: %w", lp, err)
		}
		l := &Lock{f: f, path: lp}
		atomicfile.Track(lp) // a process ending on a fatal error removes it too
		removeStaleLocks(filepath.Dir(lp), lp)
		held.Lock()
		if held.locks == nil {
			held.locks = map[*Lock]bool{}
		}
		held.locks[l] = true
		held.Unlock()
		return l, nil
	}
	return nil, fmt.Errorf("lock %s: %w (it keeps being replaced)", lp, ErrLocked)
}

// openLock opens, or makes, the lock file lp. A symbolic link there is
// refused, never followed (the lock would write into the file it leads
// to), and so is something other than a regular file.
func openLock(lp string) (*os.File, error) {
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("lock %s %w: remove it", lp, ErrSymlink)
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("lock %s: %w", lp, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("lock %s: is not a regular file: remove it", lp)
	}
	return f, nil
}

// sweptLocks holds the directories removeStaleLocks has cleaned.
var sweptLocks sync.Map

// removeStaleLocks removes, once per directory and process, the lock files
// in dir (but own) that runs of this host left when they were killed: a
// file NAME.lock holding "PID HOST" as Take writes it, HOST this host,
// that no process holds locked and whose process is gone. They held
// nothing back already; this only tidies them away.
func removeStaleLocks(dir, own string) {
	if _, done := sweptLocks.LoadOrStore(filepath.Clean(dir), true); done {
		return
	}
	host, err := os.Hostname()
	if err != nil {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if strings.HasSuffix(e.Name(), ".lock") && e.Type().IsRegular() && p != own {
			removeIfStale(p, host)
		}
	}
}

// removeIfStale removes the lock file path when it is one of Take's, of a
// process of host that is gone, and nobody holds it.
func removeIfStale(path, host string) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	b := make([]byte, 257)
	n, _ := f.ReadAt(b, 0)
	line, nl := strings.CutSuffix(string(b[:n]), "\n")
	pid, h, ok := strings.Cut(line, " ")
	p, err := strconv.Atoi(pid)
	if !nl || !ok || err != nil || p <= 0 || h != host || n > 256 {
		return // not a lock of this host's tapeloop runs
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil || !atomicfile.Gone(p) {
		return // held (or no flock here), or its process lives
	}
	var a, c syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &a) == nil && syscall.Lstat(path, &c) == nil && a.Ino == c.Ino && a.Dev == c.Dev {
		os.Remove(path) // while locked, as Release does: a run opening it retries
	}
}

// readOwner says which process holds the lock file f, as it wrote.
func readOwner(f *os.File) string {
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0)
	pid, host, _ := strings.Cut(strings.TrimSpace(string(b[:n])), " ")
	switch {
	case pid == "":
		return "pid unknown"
	case host == "":
		return "pid " + pid
	}
	return fmt.Sprintf("pid %s on %s", pid, host)
}

// Release removes the lock file and unlocks it; a no-op on nil or after
// the first call.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	held.Lock()
	defer held.Unlock()
	l.release()
}

func (l *Lock) release() {
	if l.f == nil {
		return
	}
	delete(held.locks, l)
	os.Remove(l.path) // while still locked: a process that opened it retries
	atomicfile.Untrack(l.path)
	l.f.Close()
	l.f = nil
}

// releaseAll releases every lock this process holds.
func releaseAll() {
	held.Lock()
	defer held.Unlock()
	for l := range held.locks {
		l.release()
	}
}
