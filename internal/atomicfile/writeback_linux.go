//go:build linux

package atomicfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing n bytes of f from off to the disk and
// returns without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE).
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// mapFile extends f to size bytes with its blocks allocated (fallocate:
// a full disk is an error now, never a fault later), and maps all of it,
// shared, for reading and writing, advised into huge pages. A file system
// without fallocate, or a mapping refused (a limit on address space,
// say), gives ErrNoMap with the file left empty.
func mapFile(f *os.File, size int64) ([]byte, error) {
	fd := int(f.Fd())
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			return nil, ErrNoMap
		}
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
			return nil, ErrNoSpace
		}
		return nil, err
	}
	m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if err := unix.Ftruncate(fd, 0); err != nil {
			return nil, err
		}
		return nil, ErrNoMap
	}
	// Huge pages where the kernel keeps the file's cache in large folios
	// (ext4 and XFS on recent kernels): the mapping then takes a fault per
	// 2 MiB, not per 4 KiB, and the writes land on few TLB entries. A
	// kernel that cannot refuses the advice, or ignores it.
	unix.Madvise(m, unix.MADV_HUGEPAGE)
	return m, nil
}

func unmapFile(m []byte) error { return unix.Munmap(m) }
