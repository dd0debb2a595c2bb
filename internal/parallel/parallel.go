// Package parallel splits a loop over goroutines, one chunk per worker.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
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

// Dynamic calls fn(lo, hi) over [0, n) in chunks of chunk items handed out
// in order to up to GOMAXPROCS goroutines as each finishes its last: when
// chunks cost different amounts, or a core is busy with something else,
// the work still ends at about the same time on every core.
func Dynamic(n, chunk int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	chunk = max(chunk, 1)
	w := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	var next atomic.Int64
	work := func() {
		for {
			lo := int(next.Add(int64(chunk))) - chunk
			if lo >= n {
				return
			}
			fn(lo, min(lo+chunk, n))
		}
	}
	if w <= 1 {
		work()
		return
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for range w - 1 {
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}
