//go:build tapeloop_cudaemu && !tapeloop_cuda

package cuda

import (
	"errors"
	"time"
	"unsafe"
)

// The emulator's streams run work in the order least favourable to code
// that forgets to order it, stricter than a GPU's, which might happen to
// run it in a harmless order:
//   - kernels, GEMMs and FFTs queued on a stream run only when something
//     waits for them: an event wait by another stream, an event or stream
//     synchronisation, a later copy on the same stream;
//   - an event wait, and a copy from the device, runs as soon as it is
//     queued (after the work queued before it on its stream, and for a wait
//     the other stream's work up to the event): a copy not ordered after
//     the kernel that writes its source reads what was there before;
//   - what such a copy read reaches the host only when the host waits for
//     it (a stream or event synchronisation): the host reading a copy's
//     destination without waiting reads what was there before.
// Work on the default stream runs at once. A synchronous copy to the
// device returns once its source is read, as one from pageable memory
// does on a GPU, and its data lands on the device only at the next work
// on the default stream (recording an event there, for another stream to
// wait on, included): a stream that reads the data without waiting for
// the default stream reads what was there before.

// emuStream is a stream's queue of work not yet run, and its copies to the
// host not yet delivered.
type emuStream struct {
	drv      *driver
	def      bool // the default stream: work runs at once
	pending  []func() error
	done     int64 // items run so far
	err      error // the first fault: later work does not run
	flushing bool
	landing  []landing
}

// landing is a copy to the host, made by item pos of its stream, that the
// host has not yet waited for.
type landing struct {
	pos     int64
	deliver func()
}

// emuEvent marks a point in a stream's queue, and the time its work up to
// there finished.
type emuEvent struct {
	s     *emuStream
	pos   int64      // the items of s before the mark
	stamp *time.Time // set when the mark is reached
}

type (
	stream = *emuStream
	event  = *emuEvent
)

// enqueue queues fn on s, or runs it now on the default stream.
func (s *emuStream) enqueue(fn func() error) error {
	if s.def {
		s.drv.land()
		return fn()
	}
	if s.err != nil {
		return s.err
	}
	s.pending = append(s.pending, fn)
	return nil
}

// enqueueNow queues fn on s and runs s's work up to it.
func (s *emuStream) enqueueNow(fn func() error) error {
	if err := s.enqueue(fn); err != nil || s.def {
		return err
	}
	return s.flush(s.queued())
}

// queued is the number of items queued on s ever.
func (s *emuStream) queued() int64 { return s.done + int64(len(s.pending)) }

// flush runs s's work up to item to.
func (s *emuStream) flush(to int64) error {
	if s.def { // its work ran when it was queued
		return nil
	}
	if s.done >= to {
		return s.err
	}
	if s.flushing {
		return errors.New("streams wait for each other in a cycle")
	}
	s.flushing = true
	defer func() { s.flushing = false }()
	for s.done < to {
		fn := s.pending[0]
		s.pending[0] = nil
		s.pending = s.pending[1:]
		s.done++
		if s.err == nil {
			s.err = fn()
		}
	}
	return s.err
}

// hostWait is the host waiting for s's work up to item to: it runs, and
// its copies to the host land.
func (s *emuStream) hostWait(to int64) error {
	if s.def {
		s.drv.land()
		return nil
	}
	err := s.flush(to)
	kept := s.landing[:0]
	for _, l := range s.landing {
		if l.pos <= to {
			l.deliver()
		} else {
			kept = append(kept, l)
		}
	}
	clear(s.landing[len(kept):])
	s.landing = kept
	return err
}

func (drv *driver) newStream() (stream, error) { return &emuStream{drv: drv}, nil }

func (drv *driver) newEvent(bool) (event, error) { return &emuEvent{stamp: new(time.Time)}, nil }

func (drv *driver) record(e event, s stream) error {
	stamp := new(time.Time)
	e.s, e.stamp, e.pos = s, stamp, s.queued()+1
	return s.enqueue(func() error { *stamp = time.Now(); return nil })
}

// wait makes s's later work wait for e's mark as recorded now.
func (drv *driver) wait(s stream, e event) error {
	es, pos := e.s, e.pos
	return s.enqueueNow(func() error { return es.flush(pos) })
}

func (drv *driver) syncEvent(e event) error   { return e.s.hostWait(e.pos) }
func (drv *driver) syncStream(s stream) error { return s.hostWait(s.queued()) }

// elapsed is the wall time between the two marks: the emulator's time,
// not a GPU's.
func (drv *driver) elapsed(start, stop event) (float64, error) {
	return stop.stamp.Sub(*start.stamp).Seconds(), nil
}

// launch runs the kernel on the default stream, or queues it.
func (drv *driver) launch(s stream, name string, gx, gy, block int, words []uint64) error {
	return s.enqueue(func() error { return drv.launchNow(name, gx, gy, block, words) })
}

// toHost2DAsync queues the copy and runs it at once: it reads the device
// memory now, and what it read lands at dst when the host waits for it.
// Its source must be inside an allocation.
func (drv *driver) toHost2DAsync(s stream, dst unsafe.Pointer, dpitch int64, src DevicePtr, spitch, width, height int64) error {
	if s.def {
		return drv.toHost2D(dst, dpitch, src, spitch, width, height)
	}
	pos := s.queued() + 1
	return s.enqueueNow(func() error {
		read := make([]byte, width*height)
		if err := drv.read2D("cuMemcpy2DAsync", unsafe.Pointer(&read[0]), width, src, spitch, width, height); err != nil {
			return err
		}
		s.landing = append(s.landing, landing{pos, func() {
			for r := range height {
				copy(unsafe.Slice((*byte)(unsafe.Add(dst, r*dpitch)), width), read[r*width:(r+1)*width])
			}
		}})
		return nil
	})
}
