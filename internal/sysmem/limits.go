package sysmem

// The limits on the memory a process may take: the machine's available
// memory, its control group's (cgroup v2 or v1, the process's own group and
// every group above it) and its own resource limits on address space
// (ulimit -v) and data (ulimit -d).

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Bound is one limit on the memory this process may take, and what it
// leaves.
type Bound struct {
	// Name says, as a user sets or reads it, what the limit is:
	// "available memory", "cgroup memory.max of /sys/fs/cgroup/job",
	// "ulimit -v 3000000" (the KiB that ulimit takes).
	Name string
	// Limit is the limit in bytes; Used what counts against it now.
	Limit, Used int64
	// Margin is kept back for what the process will still map besides
	// the planned buffers: the Go runtime's and the C heaps' growth and
	// the stacks of threads not yet started.
	Margin int64
	// Left is what the process may still take: Limit − Used − Margin,
	// at least 0.
	Left int64
	// Rlimit says the limit is the process's own (ulimit -v or -d).
	Rlimit bool
}

// Bounds lists every limit on the memory this process may take: the
// machine's available memory, its cgroup's limit where one is set, and
// its address-space and data limits where set.
func Bounds() ([]Bound, error) {
	avail, err := memAvailable()
	if err != nil {
		return nil, err
	}
	return append([]Bound{{Name: "available memory", Limit: avail, Left: avail}}, Limits()...), nil
}

// Limits lists the limits set on this process's memory, of its own
// making or its batch system's: its cgroup's (the tightest of its group
// and the groups above it) and its address-space and data limits, the
// machine's available memory left out.
func Limits() []Bound {
	var bs []Bound
	root, selfFile := cgroupFiles()
	self, _ := os.ReadFile(selfFile)
	if b, ok := cgroupBound(root, self); ok {
		bs = append(bs, b)
	}
	return append(bs, rlimitBounds(readStatus())...)
}

// cgroupPaths are where the cgroup file systems are mounted and the file
// naming the process's groups, as UseCgroupFiles sets them: empty, the
// system's (/sys/fs/cgroup, /proc/self/cgroup).
var cgroupPaths struct {
	sync.Mutex
	root, self string
}

func cgroupFiles() (root, self string) {
	cgroupPaths.Lock()
	defer cgroupPaths.Unlock()
	if cgroupPaths.root == "" {
		return "/sys/fs/cgroup", "/proc/self/cgroup"
	}
	return cgroupPaths.root, cgroupPaths.self
}

// UseCgroupFiles makes the memory limits read the cgroup files under root
// and the process's groups from the file self (as /proc/self/cgroup), for
// tests that lay out a batch system's groups in a directory; the function
// it returns restores the system's.
func UseCgroupFiles(root, self string) (restore func()) {
	cgroupPaths.Lock()
	defer cgroupPaths.Unlock()
	oldRoot, oldSelf := cgroupPaths.root, cgroupPaths.self
	cgroupPaths.root, cgroupPaths.self = root, self
	return func() {
		cgroupPaths.Lock()
		defer cgroupPaths.Unlock()
		cgroupPaths.root, cgroupPaths.self = oldRoot, oldSelf
	}
}

// Tightest is the bound that leaves the least.
func Tightest() (Bound, error) {
	bs, err := Bounds()
	if err != nil {
		return Bound{}, err
	}
	t := bs[0]
	for _, b := range bs[1:] {
		if b.Left < t.Left {
			t = b
		}
	}
	return t, nil
}

// Available is the memory this process may still use: MemAvailable from
// /proc/meminfo, lowered to what its cgroup's limit (as under SLURM or
// Kubernetes) and its own address-space and data limits (ulimit -v,
// ulimit -d) leave.
func Available() (int64, error) {
	t, err := Tightest()
	if err != nil {
		return 0, err
	}
	return t.Left, nil
}

// ---- resource limits ----

// status is what /proc/self/status says of the process's memory.
type status struct {
	vmSize, vmData int64 // bytes mapped, and of them private and writable
	threads        int
	ok             bool
}

func readStatus() status {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return status{}
	}
	return parseStatus(b)
}

func parseStatus(b []byte) status {
	var s status
	var found int
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := strings.Fields(string(v))
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			continue
		}
		switch string(k) {
		case "VmSize":
			s.vmSize = n << 10
			found++
		case "VmData":
			s.vmData = n << 10
			found++
		case "Threads":
			s.threads = int(n)
		}
	}
	s.ok = found == 2
	return s
}

// arenaMax is the cap SetMallocArenas set on malloc's arenas, 0: none.
var arenaMax atomic.Int64

// Reserves per thread not yet started: its stack (ulimit -s; 8 MiB when
// unlimited, as glibc does) and the 64 MiB of address space glibc reserves
// for each thread's malloc arena (at most 8 per CPU) when the C kernels
// allocate on it; and a fixed reserve for the growth of the Go runtime's
// own structures.

const (
	defaultStack = 8 << 20
	arenaBytes   = 64 << 20
	runtimeSlack = 64 << 20
)

// threadsExpected is how many threads a run may start: the Go scheduler's
// GOMAXPROCS running ones, a quarter more handed off during calls into C,
// and the runtime's own (its monitor, template thread, signal and
// garbage-collection helpers) with some to spare.
func threadsExpected() int { return threadsFor(runtime.GOMAXPROCS(0)) }

// threadsFor is threadsExpected with GOMAXPROCS p.
func threadsFor(p int) int { return p + p/4 + 8 }

// fittedFrom is the GOMAXPROCS FitThreads lowered, 0: none.
var fittedFrom atomic.Int64

// FitThreads lowers GOMAXPROCS under an address-space limit (ulimit -v, a
// batch system's h_vmem) until the stacks of the threads still to come
// take at most a quarter of what the limit leaves: on a node of many
// cores, a job given a few GB of address space would otherwise have it
// all kept back for stacks (8 MiB each) and no room left to work. Without
// such a limit it does nothing.
func FitThreads() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &r) != nil || r.Cur >= math.MaxInt64 {
		return
	}
	st := readStatus()
	if !st.ok {
		return
	}
	before := runtime.GOMAXPROCS(0)
	if p := fitThreads(before, st.threads, int64(r.Cur)-st.vmSize, stackBytes()); p < before {
		runtime.GOMAXPROCS(p)
		fittedFrom.Store(int64(before))
	}
}

// fitThreads is the largest GOMAXPROCS, at most p, whose threads still to
// come (threadsNow running) have stacks of stack bytes within a quarter of
// left; 1 at least.
func fitThreads(p, threadsNow int, left, stack int64) int {
	for ; p > 1; p-- {
		if int64(max(threadsFor(p)-threadsNow, 0))*stack <= left/4 {
			break
		}
	}
	return p
}

// FittedFrom is the GOMAXPROCS that FitThreads lowered, 0 when it did not.
func FittedFrom() int { return int(fittedFrom.Load()) }

// stackBytes is a new thread's stack: ulimit -s, or 8 MiB when unlimited.
func stackBytes() int64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_STACK, &r) == nil && r.Cur > 0 && r.Cur < 1<<30 {
		return int64(r.Cur)
	}
	return defaultStack
}

// margins are what rlimitBounds keeps back for address space and data
// with threadsNow threads running: the stacks and arenas of the threads
// still to come, and runtimeSlack.
func margins(threadsNow int) (as, data int64) {
	more := max(threadsExpected()-threadsNow, 0)
	arenas := min(more, max(8*runtime.NumCPU()-threadsNow, 0))
	if m := int(arenaMax.Load()); m > 0 { // SetMallocArenas: the main arena and m − 1 others
		arenas = min(arenas, m-1)
	}
	stack := stackBytes()
	as = int64(more)*stack + int64(arenas)*arenaBytes + runtimeSlack
	data = int64(more)*stack + runtimeSlack
	return as, data
}

// rlimitBounds are the bounds of the address-space and data limits that
// are set, from the process's status st.
func rlimitBounds(st status) []Bound {
	if !st.ok {
		return nil
	}
	asMargin, dataMargin := margins(st.threads)
	var out []Bound
	for _, l := range []struct {
		res    int
		flag   string
		used   int64
		margin int64
	}{
		{syscall.RLIMIT_AS, "-v", st.vmSize, asMargin},
		{syscall.RLIMIT_DATA, "-d", st.vmData, dataMargin},
	} {
		var r syscall.Rlimit
		if err := syscall.Getrlimit(l.res, &r); err != nil {
			continue
		}
		if b, ok := rlimitBound(l.flag, uint64(r.Cur), l.used, l.margin); ok {
			out = append(out, b)
		}
	}
	return out
}

// rlimitBound is the bound of a resource limit of cur bytes (ulimit flag
// flag) with used bytes counted against it: none when the limit is not
// set.
func rlimitBound(flag string, cur uint64, used, margin int64) (Bound, bool) {
	if cur >= math.MaxInt64 { // RLIM_INFINITY is all ones
		return Bound{}, false
	}
	lim := int64(cur)
	return Bound{Name: fmt.Sprintf("ulimit %s %d", flag, lim>>10), Limit: lim, Used: used, Margin: margin,
		Left: max(lim-used-margin, 0), Rlimit: true}, true
}

// ---- control groups ----

// CgroupPaths reads /proc/self/cgroup's text self: the process's cgroup v2
// path (the "0::" line) and its v1 path in the hierarchy of controller
// (e.g. "memory", "cpu"), with hasV1 when there is such a hierarchy.
func CgroupPaths(self []byte, controller string) (v2, v1 string, hasV1 bool) {
	for line := range strings.Lines(string(self)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2 = f[2]
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == controller {
				v1, hasV1 = f[2], true
			}
		}
	}
	return v2, v1, hasV1
}

// cgroupBound is the tightest memory limit over the process's control
// group and every group above it, self being /proc/self/cgroup and root
// where the cgroup file systems are mounted (/sys/fs/cgroup). Under cgroup
// v2 the limit is memory.max ("max": none), under v1 memory.limit_in_bytes
// (a huge value: none). A group's use is its memory.current (v1:
// memory.usage_in_bytes) less the file cache the kernel can drop
// (inactive_file in memory.stat), as container tools count it. Where the
// process's group is not found under root, as in a container that shows
// the host's path, root's own files are the group's.
func cgroupBound(root string, self []byte) (Bound, bool) {
	v2, v1, hasV1 := CgroupPaths(self, "memory")
	if b, ok := cgroupWalk(root, v2, "memory.max", "memory.current", "inactive_file"); ok {
		return b, true
	}
	if hasV1 || len(self) == 0 {
		return cgroupWalk(filepath.Join(root, "memory"), v1, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
	}
	return Bound{}, false
}

// cgroupWalk reads limitFile in the group rel under mount and in each
// group above it, up to mount itself, and returns the one that leaves the
// least.
func cgroupWalk(mount, rel, limitFile, usageFile, inactive string) (Bound, bool) {
	dir := filepath.Join(mount, filepath.Clean("/"+rel))
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = mount
	}
	var best Bound
	found := false
	for {
		if lim, ok := readLimit(filepath.Join(dir, limitFile)); ok {
			used, _ := readInt(filepath.Join(dir, usageFile))
			if cache, ok := statField(filepath.Join(dir, "memory.stat"), inactive); ok && cache <= used {
				used -= cache
			}
			b := Bound{Name: "cgroup " + limitFile + " of " + dir, Limit: lim, Used: used, Left: max(lim-used, 0)}
			if !found || b.Left < best.Left {
				best, found = b, true
			}
		}
		if dir == mount || len(dir) <= len(mount) {
			break
		}
		dir = filepath.Dir(dir)
	}
	return best, found
}

// readLimit reads a cgroup limit: none when the file is missing, says
// "max", or holds a value so large that it means no limit (v1's
// 9223372036854771712).
func readLimit(path string) (int64, bool) {
	v, ok := readInt(path)
	if !ok || v < 0 || v >= 1<<60 {
		return 0, false
	}
	return v, true
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return v, err == nil
}

// statField reads one "name value" line of a cgroup's memory.stat.
func statField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseInt(f[1], 10, 64)
			return v, err == nil && v >= 0
		}
	}
	return 0, false
}
