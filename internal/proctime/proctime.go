// Package proctime tells how long ago the process started: a C
// constructor reads the monotonic clock when the dynamic loader hands
// control to the executable, before the Go runtime starts and before any
// package is initialised, so a command can say how much of its wall time
// its own start-up took.
package proctime

/*
#include <stdint.h>
#include <time.h>

static int64_t tl_proc_start_ns;

static int64_t tl_now_ns(void) {
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
		return 0;
	}
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((constructor)) static void tl_proc_start(void) { tl_proc_start_ns = tl_now_ns(); }

// tl_proc_elapsed_ns is the time since the constructor ran, or -1 where it
// did not (a binary linked without the C start-up code).
static int64_t tl_proc_elapsed_ns(void) {
	int64_t now = tl_now_ns();
	if (tl_proc_start_ns == 0 || now == 0) {
		return -1;
	}
	return now - tl_proc_start_ns;
}
*/
import "C"

import "time"

// Started is when the process's own code began to run (after the
// dynamic loader, before the Go runtime), as a time.Time with a monotonic
// reading; ok is false where that is unknown (a binary linked by Go's
// internal linker runs no C constructors).
func Started() (t time.Time, ok bool) {
	now := time.Now()
	ns := int64(C.tl_proc_elapsed_ns())
	if ns < 0 {
		return time.Time{}, false
	}
	return now.Add(-time.Duration(ns)), true
}
