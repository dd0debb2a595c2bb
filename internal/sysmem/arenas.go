package sysmem

// SetMallocArenas tells the memory limits that the process caps glibc's
// malloc at n arenas (mallopt M_ARENA_MAX, set by the command before any
// thread allocates): threads still to come then reserve no arenas of
// their own, 64 MiB of address space each, under ulimit -v.
func SetMallocArenas(n int) {
	if n > 0 {
		arenaMax.Store(int64(n))
	}
}
