package sysmem

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxRSSBytes is getrusage's maxrss in bytes: macOS counts bytes.
func maxRSSBytes(ru *syscall.Rusage) int64 { return ru.Maxrss }

// adviseHuge does nothing: macOS has no transparent huge pages to ask for.
func adviseHuge([]byte) {}

// memAvailable is the machine's physical memory (sysctl hw.memsize):
// macOS has no single figure like Linux's MemAvailable (what it reports
// free leaves out its file cache and compressed pages), so the default
// memory limit, half of this, is half of the machine.
func memAvailable() (int64, error) {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0, fmt.Errorf("sysmem: sysctl hw.memsize: %w", err)
	}
	return int64(n), nil
}
