//go:build linux

package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing n bytes of f from off to the disk and
// returns without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE).
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
