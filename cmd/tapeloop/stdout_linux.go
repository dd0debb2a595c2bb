package main

/*
#include <errno.h>
#include <fcntl.h>

// tl_stdout_closed is 1 when file descriptor 1 was closed as the program
// loaded (a shell's >&-), before the Go runtime opens /dev/null in its
// place.
int tl_stdout_closed;

__attribute__((constructor)) static void tl_check_stdout(void) {
  tl_stdout_closed = fcntl(1, F_GETFD) == -1 && errno == EBADF;
}
*/
import "C"

// A standard output closed at start fails every write, as it would in a C
// program, instead of sending the results to /dev/null.
func init() {
	if C.tl_stdout_closed != 0 {
		stdout.w = closedStdout{}
	}
}
