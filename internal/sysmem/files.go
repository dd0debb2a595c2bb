package sysmem

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// tooMany is how the system words EMFILE.
const tooMany = "too many open files"

// FileLimit is the process's limit on open files (ulimit -n), 0 when it
// cannot be read.
func FileLimit() uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return uint64(r.Cur) // int64 on the BSDs
}

// fileLimitError is an error from running out of file descriptors, with
// the limit named.
type fileLimitError struct {
	err   error
	limit uint64
}

func (e *fileLimitError) Error() string {
	hint := fmt.Sprintf("%s (ulimit -n %d): raise it with ulimit -n", tooMany, e.limit)
	msg := e.err.Error()
	if strings.Contains(msg, tooMany) {
		return strings.Replace(msg, tooMany, hint, 1)
	}
	return msg + ": " + hint
}

func (e *fileLimitError) Unwrap() error { return e.err }

// WithFileLimit returns err, naming the process's open-file limit and
// how to raise it when err comes from running out of file descriptors
// (EMFILE): "…: too many open files (ulimit -n 12): raise it with ulimit
// -n". Other errors, and nil, are returned as they are; so is one that
// already names the limit.
func WithFileLimit(err error) error {
	if err == nil || !errors.Is(err, syscall.EMFILE) {
		return err
	}
	var fl *fileLimitError
	if errors.As(err, &fl) {
		return err
	}
	return &fileLimitError{err, FileLimit()}
}
