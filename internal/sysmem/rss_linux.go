package sysmem

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// maxRSSBytes is getrusage's maxrss in bytes: Linux counts KiB.
func maxRSSBytes(ru *syscall.Rusage) int64 { return ru.Maxrss << 10 }

// adviseHuge is madvise(MADV_HUGEPAGE) on b, whose ends are whole 2 MiB
// pages.
func adviseHuge(b []byte) { syscall.Madvise(b, 14) }

// memAvailable is MemAvailable from /proc/meminfo: the memory the kernel
// can give without swapping, its page cache and reclaimable caches
// counted as free.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("sysmem: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("sysmem: no MemAvailable in /proc/meminfo")
}
