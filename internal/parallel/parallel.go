// Package parallel splits a loop over goroutines, one chunk per worker.
package parallel

import (
	"runtime"
	"sync"
)

// For calls fn(lo, hi) over [0, n) in contiguous chunks of at least grain
// items, on up to GOMAXPROCS goroutines, and waits for all of them. The last
// chunk runs on the calling goroutine.
func For(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	w := min(runtime.GOMAXPROCS(0), (n+grain-1)/grain)
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for i := range w - 1 {
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(i*n/w, (i+1)*n/w)
	}
	fn((w-1)*n/w, n)
	wg.Wait()
}
