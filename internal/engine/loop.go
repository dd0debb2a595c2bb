package engine

import (
	"fmt"
	"time"
)

// batchLoop drives every batch of a job through one or more Programs
// compiled for it: the one loop behind Run (one device or several) and
// Session.Run (in-process calls).
type batchLoop struct {
	job   Job
	progs []*Program
	items int
	// stopped is checked before each batch, and after a batch that failed
	// (a stopped op fails); after ends the error of a stopped run.
	stopped func() bool
	after   string
	// busy reads program i's device busy time so far (nil: none).
	busy []func() float64
	// record, when set, takes each batch's seconds, from its Feed to the
	// end of its Consume, its device's busy seconds during its run and its
	// cost (the job's Coster; zero without).
	record func(secs, busy, cost float64)
	// done, when set, is told the items consumed so far after each batch.
	done func(items int)
}

// run feeds, runs and consumes every batch in order and returns how many
// it ran. Batch k runs on program k mod D; with D > 1 the programs run
// concurrently, each in its own goroutine, while Feed and Consume stay in
// the caller's goroutine in batch order, so the job sees the same sequence
// as on one device.
func (l *batchLoop) run() (int, error) {
	nd, batch := len(l.progs), l.progs[0].Batch
	nb := (l.items + batch - 1) / batch
	size := func(k int) int { return min(batch, l.items-k*batch) }
	type result struct {
		busy float64
		err  error
	}
	busy := func(i int) float64 {
		if i < len(l.busy) && l.busy[i] != nil {
			return l.busy[i]()
		}
		return 0
	}
	exec := func(i int) result {
		b0 := busy(i)
		_, err := l.progs[i].Run()
		return result{busy(i) - b0, err}
	}
	done := make([]chan result, nd)
	var start []chan struct{}
	if nd > 1 {
		start = make([]chan struct{}, nd)
		for i := range l.progs {
			start[i], done[i] = make(chan struct{}), make(chan result, 1)
			go func(i int) {
				for range start[i] {
					done[i] <- exec(i)
				}
			}(i)
		}
	} else {
		done[0] = make(chan result, 1)
	}
	inflight := make([]bool, nd)
	defer func() { // before the Programs close: nothing may still be running them
		for i := range start {
			if inflight[i] {
				<-done[i]
			}
			close(start[i])
		}
	}()
	fed := make([]time.Time, nd)
	stopErr := func(what string) error {
		return fmt.Errorf("%s: %w %s%s", l.job.Name(), ErrInterrupted, what, l.after)
	}
	// consume waits for batch k and consumes it.
	consume := func(k int) error {
		i := k % nd
		r := <-done[i]
		inflight[i] = false
		if r.err != nil {
			if l.stopped() {
				return stopErr(fmt.Sprintf("during the batch at item %d of %d", k*batch, l.items))
			}
			return r.err
		}
		if err := l.job.Consume(l.progs[i].Outputs(), k*batch, size(k)); err != nil {
			return err
		}
		if l.record != nil {
			var cost float64
			if c, ok := l.job.(Coster); ok {
				cost = c.Cost(k*batch, size(k))
			}
			l.record(time.Since(fed[i]).Seconds(), r.busy, cost)
		}
		if l.done != nil {
			l.done(k*batch + size(k))
		}
		return nil
	}
	next := 0 // the oldest batch not yet consumed
	for k := range nb {
		if l.stopped() {
			return next, stopErr(fmt.Sprintf("after %d of %d items", k*batch, l.items))
		}
		if k >= nd { // program k mod D is busy with batch k−D
			if err := consume(next); err != nil {
				return next, err
			}
			next++
		}
		i := k % nd
		fed[i] = time.Now()
		p := l.progs[i]
		if err := l.job.Feed(p.Inputs(), k*batch, size(k)); err != nil {
			return next, err
		}
		if err := p.Pad(size(k)); err != nil {
			return next, err
		}
		inflight[i] = true
		if nd > 1 {
			start[i] <- struct{}{}
		} else {
			done[i] <- exec(i)
		}
	}
	for ; next < nb; next++ {
		if err := consume(next); err != nil {
			return next, err
		}
	}
	return nb, nil
}
