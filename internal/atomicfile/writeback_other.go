//go:build !linux

package atomicfile

import "os"

// startWriteback does nothing here: the data is written by Commit's sync.
func startWriteback(f *os.File, off, n int64) {}
