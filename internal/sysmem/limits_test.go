package sysmem

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tapeloop/tapeloop/internal/testutil"
)

func TestParseStatus(t *testing.T) {
	st := parseStatus([]byte("Name:\ttapeloop\nVmPeak:\t 1945464 kB\nVmSize:\t 1179260 kB\nVmData:\t   53000 kB\nThreads:\t10\n"))
	if !st.ok || st.vmSize != 1179260<<10 || st.vmData != 53000<<10 || st.threads != 10 {
		t.Errorf("parseStatus = %+v", st)
	}
	if st := parseStatus([]byte("Name:\tx\nThreads:\t1\n")); st.ok {
		t.Errorf("parseStatus without VmSize and VmData: ok %+v", st)
	}
}

func TestRlimitBound(t *testing.T) {
	if _, ok := rlimitBound("-v", ^uint64(0), 1<<30, 0); ok {
		t.Error("an unlimited address space is a bound")
	}
	b, ok := rlimitBound("-v", 3000000<<10, 1<<30, 100<<20)
	if !ok || b.Name != "ulimit -v 3000000" || b.Limit != 3000000<<10 || b.Left != 3000000<<10-1<<30-100<<20 || !b.Rlimit {
		t.Errorf("rlimitBound = %+v, %v", b, ok)
	}
	if b, _ := rlimitBound("-d", 1<<30, 2<<30, 0); b.Left != 0 {
		t.Errorf("a limit below what is mapped leaves %d", b.Left)
	}
}

// cgroupTree writes files (path relative to the mount: contents) under a
// new directory and returns it.
func cgroupTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupBound(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		name  string
		files map[string]string
		self  string
		left  int64 // -1: no bound
		in    string
	}{
		{"v2 own group's limit, the root's missing",
			map[string]string{"job/memory.max": "4294967296\n", "job/memory.current": "1073741824\n"},
			"0::/job\n", 3 * gib, "/job"},
		{"v2 max means none",
			map[string]string{"job/memory.max": "max\n", "job/memory.current": "1073741824\n"},
			"0::/job\n", -1, ""},
		{"v2 a parent's limit is tighter",
			map[string]string{"slurm/memory.max": "2147483648\n", "slurm/memory.current": "1073741824\n",
				"slurm/job/memory.max": "max\n", "slurm/job/step/memory.max": "8589934592\n", "slurm/job/step/memory.current": "10\n"},
			"0::/slurm/job/step\n", gib, "/slurm"},
		{"v2 the own group's limit is tighter",
			map[string]string{"slurm/memory.max": "8589934592\n", "slurm/memory.current": "0\n",
				"slurm/job/memory.max": "1073741824\n", "slurm/job/memory.current": "536870912\n"},
			"0::/slurm/job\n", gib / 2, "/slurm/job"},
		{"v2 reclaimable file cache is not counted",
			map[string]string{"job/memory.max": "4294967296\n", "job/memory.current": "3221225472\n",
				"job/memory.stat": "anon 1073741824\nfile 2147483648\ninactive_file 2147483648\n"},
			"0::/job\n", 3 * gib, "/job"},
		{"v2 in a namespace: the host's path is not there, the mount is the group",
			map[string]string{"memory.max": "2147483648\n", "memory.current": "0\n"},
			"0::/kubepods/pod1/c1\n", 2 * gib, ""},
		{"v2 used over the limit leaves nothing",
			map[string]string{"job/memory.max": "1073741824\n", "job/memory.current": "2147483648\n"},
			"0::/job\n", 0, "/job"},
		{"v1 nested",
			map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n",
				"memory/batch/memory.limit_in_bytes": "3221225472\n", "memory/batch/memory.usage_in_bytes": "1073741824\n",
				"memory/batch/job/memory.limit_in_bytes": "9223372036854771712\n", "memory/batch/job/memory.usage_in_bytes": "5\n"},
			"4:memory:/batch/job\n3:cpu,cpuacct:/batch/job\n0::/\n", 2 * gib, "/memory/batch"},
		{"v1 unlimited",
			map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"},
			"4:memory:/process_api/x\n0::/\n", -1, ""},
		{"v1 memory controller joined with another",
			map[string]string{"memory/job/memory.limit_in_bytes": "1073741824\n", "memory/job/memory.usage_in_bytes": "0\n"},
			"5:cpu,memory:/job\n", gib, "/memory/job"},
		{"garbage in the files",
			map[string]string{"job/memory.max": "lots\n", "memory/job/memory.limit_in_bytes": "-1\n"},
			"0::/job\n4:memory:/job\n", -1, ""},
		{"no cgroup files at all", map[string]string{}, "0::/job\n", -1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := cgroupTree(t, c.files)
			b, ok := cgroupBound(root, []byte(c.self))
			if c.left < 0 {
				if ok {
					t.Fatalf("a bound where none is set: %+v", b)
				}
				return
			}
			if !ok {
				t.Fatalf("no bound; want %d bytes left", c.left)
			}
			if b.Left != c.left {
				t.Errorf("left %d, want %d (%+v)", b.Left, c.left, b)
			}
			if !strings.HasPrefix(b.Name, "cgroup ") || !strings.Contains(b.Name, root+c.in) {
				t.Errorf("name %q does not name the group %s", b.Name, root+c.in)
			}
		})
	}
}

// withRlimit runs f with the soft limit of res set to cur, restoring it.
func withRlimit(t *testing.T, res int, cur uint64, f func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(res, &old); err != nil {
		t.Skip(err)
	}
	if old.Max < cur {
		t.Skipf("hard limit %d below %d", old.Max, cur)
	}
	if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: cur, Max: old.Max}); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(res, &old)
	f()
}

// TestAvailableUnderUlimit sets the process's own address-space and data
// limits a little above what it has mapped: Available must stay within
// what each leaves, less the margin, and name it.
func TestAvailableUnderUlimit(t *testing.T) {
	if testutil.Race {
		// The race detector maps its shadow memory and traces as the
		// process runs, and fails outright when a limit refuses them.
		t.Skip("the race detector's own mappings need room a tight address-space limit does not leave")
	}
	st := readStatus()
	if !st.ok {
		t.Skip("no VmSize in /proc/self/status")
	}
	for _, c := range []struct {
		res  int
		flag string
		used int64
	}{{syscall.RLIMIT_AS, "-v", st.vmSize}, {syscall.RLIMIT_DATA, "-d", st.vmData}} {
		const room = 3 << 30
		lim := uint64(c.used+room) &^ 1023
		withRlimit(t, c.res, lim, func() {
			a, err := Available()
			if err != nil {
				t.Fatal(err)
			}
			if a > room-runtimeSlack || a <= 0 {
				t.Errorf("ulimit %s %d, %d mapped: Available %d, want in (0, %d]", c.flag, lim>>10, c.used, a, room-runtimeSlack)
			}
			b, err := Tightest()
			if err != nil || b.Name != "ulimit "+c.flag+" "+strconv.FormatUint(lim>>10, 10) || !b.Rlimit {
				t.Errorf("Tightest = %+v, %v", b, err)
			}
			p, ok := processLimit()
			// Two readings of what is mapped: the runtime (and the race
			// detector) may map memory between them.
			if d := p.Left - a; !ok || d > 64<<20 || d < -64<<20 || p.Limit != int64(lim) || p.Name != b.Name {
				t.Errorf("ProcessLimit = %+v, %v; Available %d", p, ok, a)
			}
		})
	}
	// A limit below what is mapped leaves nothing, without an error.
	// Under it the runtime cannot map anything more (a fatal error, not a
	// failed test): what Available needs is allocated once before, and
	// the collector, whose work buffers would be new mappings, is off
	// while the limit holds.
	if _, err := Available(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	withRlimit(t, syscall.RLIMIT_DATA, 1<<20, func() {
		if a, err := Available(); err != nil || a != 0 {
			t.Errorf("ulimit -d 1024: Available = %d, %v; want 0", a, err)
		}
	})
	if p, ok := processLimit(); ok && p.Limit < 1<<40 {
		t.Logf("this process runs under %s", p.Name)
	}
}

// fitThreads keeps the stacks of the threads to come within a quarter of
// what the limit leaves: worked by hand for 700 MiB left and 8 MiB stacks
// with 8 threads running, a quarter is 175 MiB, 21 stacks: GOMAXPROCS 17
// starts 17 + 4 + 8 − 8 = 21 threads more, 18 would start 22.
func TestFitThreads(t *testing.T) {
	for _, c := range []struct {
		p, now      int
		left, stack int64
		want        int
	}{
		{64, 8, 700 << 20, 8 << 20, 17},
		{17, 8, 700 << 20, 8 << 20, 17},
		{2, 8, 700 << 20, 8 << 20, 2},
		{64, 8, 700 << 20, 2 << 20, 64}, // 80 stacks of 2 MiB: 160 MiB
		{64, 8, 10 << 20, 8 << 20, 1},
		{64, 8, -1, 8 << 20, 1},
	} {
		if got := fitThreads(c.p, c.now, c.left, c.stack); got != c.want {
			t.Errorf("fitThreads(%d, %d, %d MiB, %d MiB) = %d, want %d", c.p, c.now, c.left>>20, c.stack>>20, got, c.want)
		}
	}
}

// processLimit is the tighter of the process's address-space and data
// limits (ulimit -v, ulimit -d), false when neither is set: Limit is the
// limit itself, Left what it leaves after what is mapped and the margin.
// A memory limit given to tapeloop above Limit cannot be met at all, one
// above Left not by buffers the Go runtime must allocate.
func processLimit() (Bound, bool) {
	var best Bound
	found := false
	for _, b := range rlimitBounds(readStatus()) {
		if !found || b.Left < best.Left {
			best, found = b, true
		}
	}
	return best, found
}
