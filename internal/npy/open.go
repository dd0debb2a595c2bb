package npy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is matched (errors.Is) by errors about an input that is
// not a regular file: a pipe or FIFO, a device, a socket, a directory, or
// "-" for standard input.
var ErrNotRegular = errors.New("not a regular file")

// notFileReason says why inputs must be regular files.
const notFileReason = "tapeloop reads inputs as files of a known size, which it maps or seeks; save the data to a file first"

// CheckInput is the one rule for every input file: it must be a regular
// file (links are followed). A pipe or FIFO with no writer would block the
// open or the first read forever, a device such as /dev/zero never ends,
// and neither can be mapped or sized up front. mode is the file's mode as
// os.Stat gives it; path names the file in the error.
func CheckInput(path string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	if mode.IsDir() {
		return fmt.Errorf("%s: %w: it is a directory; name a file", path, ErrNotRegular)
	}
	return fmt.Errorf("%s: %w (%s): %s", path, ErrNotRegular, Kind(mode), notFileReason)
}

// Kind names what a file that is not a regular file is: "a pipe or
// FIFO", "a character device", "a block device", "a socket", "a
// directory", or its mode.
func Kind(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a pipe or FIFO"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + mode.String()
}

// CheckStdin refuses "-" when no file of that name exists: tapeloop does
// not read standard input (/dev/stdin redirected from a file is read as
// that file).
func CheckStdin(path string) error {
	if path != "-" {
		return nil
	}
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	return fmt.Errorf("-: %w: standard input is not read: %s", ErrNotRegular, notFileReason)
}

// OpenFile opens the input file at path for reading, refusing what
// CheckInput refuses before it can block: the mode is checked before the
// open, and the open itself does not wait for a FIFO's writer (the check
// is repeated on the opened file, which may have been replaced between
// the two). Every reader of input files opens them through OpenFile. A
// directory is refused with an error matching ErrNotRegular.
func OpenFile(path string) (*os.File, error) {
	if err := CheckStdin(path); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil {
		if err := CheckInput(path, fi.Mode()); err != nil {
			return nil, err
		}
	} // else the open says what is wrong
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = CheckInput(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
