// Package atomicfile writes a file so that it appears whole or not at all:
// data goes to a temporary file beside the destination, which is renamed
// over it only on Commit. The temporary files and the directories made for
// outputs that are still pending are tracked, so that a process stopped by
// a signal can remove them (RemovePending) before it exits.
//
// A temporary file is named .NAME.tmp-HOST-PID-RANDOM, after the host and
// process writing it: those left by killed processes are removed by the
// next process of the same host to Create a file in their directory. A
// temporary file is live while its writer holds it: the writer keeps an
// flock(2) on the file while it is open, and a shared flock on its
// directory while it has temporary files there, and the kernel drops both
// when the writer ends, however it ends. So a file is removed only when no
// process anywhere (another container on the host, with its own process
// ids, included) still writes into the directory (see stale.go).
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pending holds the temporary files not yet renamed or removed, and the
// directories made for outputs not yet committed, innermost last; locks,
// the directories where this process has temporary files, each with its
// shared lock; stopped, whether RemovePending was called: the process is
// ending, and no file is made or renamed any more.
var pending struct {
	sync.Mutex
	files   map[string]bool
	dirs    []string
	locks   map[string]*dirLock
	stopped bool
}

// ErrStopped is the error of Create, MakeDirs and Rename after
// RemovePending: the process is stopping, and writes nothing more.
var ErrStopped = errors.New("the run is stopping")

func track(name string) {
	pending.Lock()
	defer pending.Unlock()
	if pending.files == nil {
		pending.files = map[string]bool{}
	}
	pending.files[name] = true
}

func untrack(name string) {
	pending.Lock()
	defer pending.Unlock()
	delete(pending.files, name)
}

// Track adds name, a file of this process's own that must not outlive it
// (a lock file), to the files RemovePending removes; Untrack takes it off.
func Track(name string) { track(name) }

// Untrack takes name, given to Track, off the pending files.
func Untrack(name string) { untrack(name) }

// RemovePending removes every pending temporary file and then the pending
// directories that are left empty. It is safe to call from a signal
// handler's goroutine while other goroutines write.
//
// Once it has run, Create, MakeDirs and Rename fail with ErrStopped, so
// that a goroutine still writing when the process is stopped leaves
// nothing behind it.
func RemovePending() {
	pending.Lock()
	defer pending.Unlock()
	pending.stopped = true
	for name := range pending.files {
		os.Remove(name)
	}
	pending.files = nil
	for i := len(pending.dirs) - 1; i >= 0; i-- {
		os.Remove(pending.dirs[i]) // fails, harmlessly, on a directory not empty
	}
	pending.dirs = nil
	for _, l := range pending.locks {
		l.close()
	}
	pending.locks = nil
}

// MakeDirs makes dir and any missing parents and returns those it made,
// outermost first. They stay pending until KeepDirs or RemoveDirs.
func MakeDirs(dir string) ([]string, error) {
	pending.Lock()
	defer pending.Unlock()
	if pending.stopped {
		return nil, fmt.Errorf("mkdir %s: %w", dir, ErrStopped)
	}
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		made = append([]string{d}, made...)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pending.dirs = append(pending.dirs, made...)
	return made, nil
}

// KeepDirs takes dirs, made by MakeDirs, off the pending list.
func KeepDirs(dirs []string) {
	pending.Lock()
	defer pending.Unlock()
	pending.dirs = slices.DeleteFunc(pending.dirs, func(d string) bool { return slices.Contains(dirs, d) })
}

// RemoveDirs removes dirs, made by MakeDirs, innermost first, where they
// are empty, and takes them off the pending list.
func RemoveDirs(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i]) // fails, harmlessly, on a directory no longer empty
	}
	KeepDirs(dirs)
}

// File is a temporary file that becomes Path on Commit.
type File struct {
	*os.File
	Path string
	// target is the file the rename replaces: Path, or where Path leads
	// when it is a symbolic link (the link stays, its file is written).
	target string
	// dir is the directory of the temporary file, whose shared lock the
	// file holds (see holdDir).
	dir  string
	done bool
	// queued is the end of the bytes WriteBack has sent to the disk.
	queued int64
	// mapped is the file mapped into memory by Map, or nil.
	mapped []byte
}

// ErrNoMap is Map's error where the file cannot be mapped for writing
// (a file system without fallocate, or a system other than Linux): the
// caller writes the file instead.
var ErrNoMap = errors.New("the output's file system cannot map it for writing")

// Map makes the file size bytes long, its blocks allocated on the disk
// (a full disk is an error here, never a fault later), and returns it
// mapped into memory, so that a result can be computed where it is stored
// and never copied to be written. The mapping ends at Commit, Close or
// Abort; WriteBackRange starts finished parts of it on their way to the
// disk. ErrNoMap means nothing was done: write the file instead.
func (f *File) Map(size int64) ([]byte, error) {
	if f.mapped != nil {
		return nil, fmt.Errorf("atomicfile: %s mapped already", f.Path)
	}
	if size <= 0 {
		return nil, ErrNoMap
	}
	m, err := mapFile(f.File, size)
	switch {
	case errors.Is(err, ErrNoMap):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("write %s: %w", f.Path, err)
	}
	f.mapped = m
	return m, nil
}

// unmap ends Map's mapping; the bytes stay in the file.
func (f *File) unmap() error {
	if f.mapped == nil {
		return nil
	}
	err := unmapFile(f.mapped)
	f.mapped = nil
	return err
}

// WriteBackRange starts writing n bytes from off, of a mapped file, from
// the page cache to the disk without waiting for them; see WriteBack.
func (f *File) WriteBackRange(off, n int64) { startWriteback(f.File, off, n) }

// WriteBack starts writing the bytes written since its last call from
// the page cache to the disk, without waiting for them (on Linux; a no-op
// elsewhere), so that Commit's sync finds little left to write. A writer
// of a large file calls it after each large write. Failures are left to
// Commit's sync to report.
func (f *File) WriteBack() {
	end, err := f.File.Seek(0, io.SeekCurrent)
	if err != nil || end <= f.queued {
		return
	}
	startWriteback(f.File, f.queued, end-f.queued)
	f.queued = end
}

// Create opens a temporary file in the directory of path. The first Create
// of a process in a directory removes the temporary files there that
// killed processes of this host left.
//
// When path is a symbolic link (to a file, or to where one is to be),
// the file it leads to is written, in its own directory, and the link
// stays, as a program that opens path for writing would do.
func Create(path string) (*File, error) {
	target, err := Target(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return create(path, target)
}

// CreateHere is Create for a file of tapeloop's own beside an output (a
// checkpoint): a symbolic link at path is replaced, never followed.
func CreateHere(path string) (*File, error) { return create(path, path) }

func create(path, target string) (*File, error) {
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	dir = filepath.Clean(dir)
	host := hostname()
	// Made, locked and tracked under pending's lock: RemovePending, from
	// a signal's goroutine, finds every temporary file made before it,
	// and none is made after it.
	pending.Lock()
	defer pending.Unlock()
	if pending.stopped {
		return nil, fmt.Errorf("create %s: %w", path, ErrStopped)
	}
	holdDir(dir, host)
	f, err := os.CreateTemp(dir, fmt.Sprintf(".%s.tmp-%s-%d-*", base, host, processID()))
	if err != nil {
		releaseDir(dir)
		return nil, fmt.Errorf("create %s: %w", path, unnamed(err))
	}
	lockTemp(f)
	if pending.files == nil {
		pending.files = map[string]bool{}
	}
	pending.files[f.Name()] = true
	return &File{File: f, Path: path, target: target, dir: dir}, nil
}

// unnamed is err without the name of the file it is about, when that is
// a temporary file's: the messages name the file the user gave.
func unnamed(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe) && strings.Contains(filepath.Base(pe.Path), ".tmp-"):
		return pe.Err
	case errors.As(err, &le) && strings.Contains(filepath.Base(le.Old), ".tmp-"):
		return le.Err
	}
	return err
}

// named is err of an operation on the temporary file, naming the file
// the user gave instead.
func (f *File) named(err error) error {
	var pe *fs.PathError
	if err == nil || !errors.As(err, &pe) || pe.Path != f.Name() {
		return err
	}
	return &fs.PathError{Op: pe.Op, Path: f.Path, Err: pe.Err}
}

// Write is os.File's Write; an error names Path, not the temporary file.
func (f *File) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	return n, f.named(err)
}

// WriteAt is os.File's WriteAt; an error names Path.
func (f *File) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	return n, f.named(err)
}

// WriteString is os.File's WriteString; an error names Path.
func (f *File) WriteString(s string) (int, error) {
	n, err := f.File.WriteString(s)
	return n, f.named(err)
}

// ReadFrom is os.File's ReadFrom; an error names Path.
func (f *File) ReadFrom(r io.Reader) (int64, error) {
	n, err := f.File.ReadFrom(r)
	return n, f.named(err)
}

// Sync is os.File's Sync; an error names Path.
func (f *File) Sync() error { return f.named(f.File.Sync()) }

// Truncate is os.File's Truncate; an error names Path.
func (f *File) Truncate(size int64) error { return f.named(f.File.Truncate(size)) }

// ErrProcFile is Target's error for a path that leads into /proc: an
// open file of a process (/dev/stdout is /proc/self/fd/1), which a file
// renamed into place would not reach.
var ErrProcFile = errors.New("leads to an open file of a process (/proc), such as standard output")

// Target is the file that writing path replaces: where path leads when
// its last element is a symbolic link, through any chain of links, to a
// file that may not exist yet; path itself otherwise. A path leading
// into /proc gives ErrProcFile.
func Target(path string) (string, error) {
	for range 40 {
		dir := filepath.Dir(path)
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		if abs, err := filepath.Abs(dir); err == nil && strings.HasPrefix(abs+"/", "/proc/") {
			return "", ErrProcFile
		}
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		to, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(path), to)
		}
		path = to
	}
	return "", errors.New("too many levels of symbolic links")
}

// globEscape quotes the characters filepath.Match treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Commit syncs and closes the temporary file and renames it to Path.
func (f *File) Commit() error { return f.commit(true) }

// SyncAfter is how long a result must have taken to make for
// CommitResult to sync it to the disk before it replaces the file at
// Path. Syncing waits for the disk to hold every byte (about as long as
// writing them at the disk's speed); a result that took less than this
// is left for the kernel to write, as NumPy's np.save and most tools
// leave theirs: only a crash of the machine itself in the half minute
// after it was written can lose it, and making it again is cheap.
const SyncAfter = 10 * time.Second

// CommitResult is Commit for a result that took took to make: it syncs
// the file only when took is at least SyncAfter, and otherwise closes and
// renames it as Commit does. Checkpoints and shards, which a resumed run
// trusts after a crash, use Commit.
func (f *File) CommitResult(took time.Duration) error { return f.commit(took >= SyncAfter) }

// syncFile syncs a file to the disk (a variable, for the tests to count).
var syncFile = (*os.File).Sync

func (f *File) commit(sync bool) error {
	if f.done {
		return fmt.Errorf("atomicfile: %s committed or aborted already", f.Path)
	}
	if err := f.unmap(); err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", f.Path, unnamed(err))
	}
	if sync {
		if err := syncFile(f.File); err != nil {
			f.Abort()
			return fmt.Errorf("write %s: %w", f.Path, unnamed(err))
		}
	}
	if err := f.File.Close(); err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", f.Path, unnamed(err))
	}
	return f.Rename()
}

// Abort closes and removes the temporary file; it is a no-op after Commit,
// so it can be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.unmap()
	f.File.Close()
	pending.Lock()
	defer pending.Unlock()
	if pending.files[f.Name()] { // else RemovePending removed it
		os.Remove(f.Name())
		delete(pending.files, f.Name())
		releaseDir(f.dir)
	}
}

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, unnamed(err))
	}
	return f.Commit()
}

// Close closes the temporary file without renaming it, so that many files
// can be written first and renamed together with Rename.
func (f *File) Close() error {
	if err := f.unmap(); err != nil {
		f.File.Close()
		return fmt.Errorf("write %s: %w", f.Path, unnamed(err))
	}
	return f.named(f.File.Close())
}

// Rename moves a closed temporary file to Path.
func (f *File) Rename() error {
	if f.done {
		return fmt.Errorf("atomicfile: %s committed or aborted already", f.Path)
	}
	f.done = true
	// Under pending's lock: a file is renamed into place before
	// RemovePending, or never.
	pending.Lock()
	defer pending.Unlock()
	if !pending.files[f.Name()] { // RemovePending removed it
		return fmt.Errorf("write %s: %w", f.Path, ErrStopped)
	}
	delete(pending.files, f.Name())
	defer releaseDir(f.dir)
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.Path, unnamed(err))
	}
	if err := os.Rename(f.Name(), f.target); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.Path, unnamed(err))
	}
	return nil
}

// ErrNoSpace is wrapped by CheckSpace's and CheckSpaces' errors.
var ErrNoSpace = errors.New("not enough disk space")

// CheckSpace checks, before any work, that the file system holding path
// has room for size more bytes. size < 0 means the size overflowed.
func CheckSpace(path string, size int64) error {
	return CheckSpaces(Need{Path: path, Bytes: size})
}

// Need is the room one output takes on its file system: Bytes exactly, or,
// when its size is known only once it is written, a bound said in Bound
// ("at least", "about") in messages. Bytes < 0 means the size overflowed.
type Need struct {
	Path  string
	Bytes int64
	Bound string
}

// CheckSpaces checks, before any work, that the outputs fit their file
// systems together: those on one file system are summed and set against
// its free space. A file system whose free space cannot be read is not
// checked (the write will say).
func CheckSpaces(needs ...Need) error {
	type group struct {
		dir   string
		paths []string
		bytes int64
		bound string
		free  int64
	}
	var groups []*group
	byDev := map[uint64]*group{}
	for _, n := range needs {
		if n.Bytes < 0 {
			return fmt.Errorf("%s: %w: the output would be larger than 8 EiB", n.Path, ErrNoSpace)
		}
		dir := filepath.Dir(n.Path)
		var st syscall.Stat_t
		var fs syscall.Statfs_t
		if syscall.Stat(dir, &st) != nil || statfs(dir, &fs) != nil {
			continue
		}
		free := int64(fs.Bavail) * int64(fs.Bsize)
		if fs.Bavail > 0 && free/int64(fs.Bsize) != int64(fs.Bavail) {
			continue // more than int64 can count
		}
		g := byDev[uint64(st.Dev)]
		if g == nil {
			g = &group{dir: dir, free: free}
			byDev[uint64(st.Dev)] = g
			groups = append(groups, g)
		}
		g.paths = append(g.paths, n.Path)
		if n.Bound != "" {
			g.bound = n.Bound
		}
		if g.bytes += n.Bytes; g.bytes < 0 {
			return fmt.Errorf("%s: %w: the outputs would be larger than 8 EiB", strings.Join(g.paths, ", "), ErrNoSpace)
		}
	}
	for _, g := range groups {
		if g.bytes <= g.free {
			continue
		}
		takes := "takes"
		if len(g.paths) > 1 {
			takes = "take"
		}
		if g.bound != "" {
			takes += " " + g.bound
		}
		what := "the output " + takes
		if len(g.paths) > 1 {
			what = "the outputs " + takes
		}
		return fmt.Errorf("%s: %w: %s %d bytes, %s has %d free", strings.Join(g.paths, ", "), ErrNoSpace, what, g.bytes, g.dir, g.free)
	}
	return nil
}

// statfs reads a file system's free space (a variable for the tests).
var statfs = syscall.Statfs

// WriteError is err, from writing the output path, as one message: "write
// PATH: what failed", the file named once (an error of File's methods names
// it already) and never by its temporary file.
func WriteError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("write %s: %w", path, err)
}
