// Package startup checks, before the packages that open files while they
// initialise (the Go runtime's poller, a dependency reading the
// executable), that the process can open a few files at all. Under a tiny
// `ulimit -n` the Go runtime would otherwise die during start-up with a
// trace of its own; this says so in one line and exits with status 1.
//
// Import it for its side effect, from a command's main package only (a
// library must never exit its host process). Packages are initialised in
// the order of their import paths where their imports allow, so this one
// (importing only syscall) runs before google.golang.org/… and
// gorgonia.org/… packages.
package startup

import "syscall"

// spare is the number of file descriptors the start-up needs beyond those
// open already: the runtime's poller (two), a dependency's read of the
// executable, and one to spare.
const spare = 4

func init() {
	var fds [spare]int
	n := 0
	defer func() {
		for _, fd := range fds[:n] {
			syscall.Close(fd)
		}
	}()
	for ; n < spare; n++ {
		fd, err := syscall.Dup(2)
		if err == syscall.EBADF { // no stderr: try stdin
			fd, err = syscall.Dup(0)
		}
		if err == syscall.EMFILE || err == syscall.ENFILE {
			var lim syscall.Rlimit
			syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
			msg := "tapeloop: too many open files (ulimit -n " + itoa(lim.Cur) + "): too few to start; raise it with ulimit -n\n"
			syscall.Write(2, []byte(msg))
			syscall.Exit(1)
		}
		if err != nil {
			return // cannot tell: the run will say
		}
		fds[n] = fd
	}
}

// itoa formats v without strconv, which this package keeps out of its
// imports.
func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; v > 0; v /= 10 {
		i--
		b[i] = byte('0' + v%10)
	}
	return string(b[i:])
}
