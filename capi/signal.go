package main

import (
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
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
// call, and a call only counts itself in and out (object.watched).
var sig struct {
	once  sync.Once
	mu    sync.Mutex // guards taken's changes and the hand-back
	ch    chan os.Signal
	taken atomic.Bool
}

// watch makes SIGINT interrupt o's call until unwatch(o).
func watch(o *object) {
	sig.once.Do(func() {
		sig.ch = make(chan os.Signal, 1)
		go forward()
	})
	o.watched.Add(1)
	if !sig.taken.Load() {
		sig.mu.Lock()
		if !sig.taken.Load() {
			signal.Notify(sig.ch, os.Interrupt)
			sig.taken.Store(true)
		}
		sig.mu.Unlock()
	}
}

func unwatch(o *object) { o.watched.Add(-1) }

// forward stops every watched call on each SIGINT, or hands the signal
// back when there is none.
func forward() {
	for range sig.ch {
		objMu.Lock()
		none := true
		for _, o := range objects {
			if o.watched.Load() > 0 {
				o.prog.Interrupt()
				none = false
			}
		}
		objMu.Unlock()
		if none {
			sig.mu.Lock()
			signal.Reset(os.Interrupt)
			sig.taken.Store(false)
			sig.mu.Unlock()
			syscall.Kill(os.Getpid(), syscall.SIGINT)
		}
	}
}
