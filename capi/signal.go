package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SIGINT during a call. A Go library inside another program (here
// Python) leaves SIGINT to that program's handler, which for Python only
// raises KeyboardInterrupt once the call returns to it. So for the length
// of an interruptible call, watch takes SIGINT (signal.Notify) and stops
// the call's program; when the last such call ends, signal.Reset gives
// SIGINT back to the program's own handler. A SIGINT taken after the last
// call ended is sent again, to that handler.
var sig struct {
	once   sync.Once
	mu     sync.Mutex
	ch     chan os.Signal
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
	if len(sig.active) == 0 {
		signal.Notify(sig.ch, os.Interrupt)
	}
	sig.active[o]++
	sig.mu.Unlock()
	return func() {
		sig.mu.Lock()
		defer sig.mu.Unlock()
		if sig.active[o]--; sig.active[o] == 0 {
			delete(sig.active, o)
		}
		if len(sig.active) == 0 {
			signal.Reset(os.Interrupt)
		}
	}
}

// forward stops every watched call on each SIGINT.
func forward() {
	for range sig.ch {
		sig.mu.Lock()
		for o := range sig.active {
			o.prog.Interrupt()
		}
		none := len(sig.active) == 0
		sig.mu.Unlock()
		if none {
			syscall.Kill(os.Getpid(), syscall.SIGINT)
		}
	}
}
