//go:build !linux

package atomicfile

import "os"

// startWriteback does nothing here: the data is written by Commit's sync.
func startWriteback(f *os.File, off, n int64) {}

// mapFile is not used here: the file is written instead.
func mapFile(f *os.File, size int64) ([]byte, error) { return nil, ErrNoMap }

func unmapFile(m []byte) error { return nil }
