package main

/*
#include <malloc.h>

// tl_arenas is the cap on malloc's arenas set below, 0 when none could be.
int tl_arenas;

// One malloc arena for the whole process, set as the program loads, before
// any thread allocates (glibc fixes the number at the first extra arena).
// By default each thread that allocates in C gets an arena of its own, up
// to 8 per CPU, each reserving 64 MiB of address space: under a ulimit -v
// (a batch system's h_vmem) those reservations, not the memory used, would
// leave a small job no room. The C kernels allocate little and rarely.
__attribute__((constructor)) static void tl_one_arena(void) {
#ifdef M_ARENA_MAX
  if (mallopt(M_ARENA_MAX, 1) == 1) tl_arenas = 1;
#endif
}
*/
import "C"

import (
	"github.com/tapeloop/tapeloop/internal/cpus"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Before any work: the arenas as set, the threads the CPUs, SLURM and the
// cgroup's CPU quota allow (or GOMAXPROCS, when set), then at most as many
// as the address-space limit leaves room for.
func init() {
	sysmem.SetMallocArenas(int(C.tl_arenas))
	cpus.Apply()
	sysmem.FitThreads()
}
