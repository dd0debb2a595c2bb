package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SIGINT during a call. A Go library inside another program (here
// Python) leaves SIGINT to that program's handler, and Python's only
// raises KeyboardInterrupt once the call has returned to it. So the first
// interruptible call takes SIGINT (signal.Notify), and each SIGINT then
// stops every interruptible call in progress. A SIGINT that finds none in
// progress is handed back: signal.Reset restores the program's own handler
// and the signal is raised again for it; the next interruptible call takes
// SIGINT again. Taking it once, not per call, keeps sigaction out of every
// call.
var sig struct {
	once   sync.Once
	mu     sync.Mutex
	ch     chan os.Signal
	taken  bool
	active map[*object]int
}

// watch makes SIGINT interrupt o's call until the returned func is called.
func watch(o *object) (done func()) {
	sig.once.Do(func() {
		sig.ch = make(chan os.Signal, 1)
		sig.active = map[*object]int{}
		go forward()
	})
	sig.mu.Lock()
	if !sig.taken {
		signal.Notify(sig.ch, os.Interrupt)
		sig.taken = true
	}
	sig.active[o]++
	sig.mu.Unlock()
	return func() {
		sig.mu.Lock()
		if sig.active[o]--; sig.active[o] == 0 {
			delete(sig.active, o)
		}
		sig.mu.Unlock()
	}
}

// forward stops every watched call on each SIGINT, or hands the signal
// back when there is none.
func forward() {
	for range sig.ch {
		sig.mu.Lock()
		for o := range sig.active {
			o.prog.Interrupt()
		}
		none := len(sig.active) == 0
		if none {
			signal.Reset(os.Interrupt)
			sig.taken = false
		}
		sig.mu.Unlock()
		if none {
			syscall.Kill(os.Getpid(), syscall.SIGINT)
		}
	}
}
