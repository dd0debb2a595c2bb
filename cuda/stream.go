//go:build tapeloop_cuda || tapeloop_cudaemu

package cuda

import (
	"fmt"
	"unsafe"
)

// Stream is a queue of GPU work: what is queued on one stream runs in
// order, and concurrently with the work of other streams unless After
// orders them. A Device's own stream (Device.Launch, Run, the synchronous
// copies) is CUDA's legacy default stream; NewStream's streams do not
// synchronise with it (CU_STREAM_NON_BLOCKING), so an op that uses them
// orders its work with After and waits for it with End or Sync before its
// results are read. The emulator runs a stream's work only when something
// waits for it, so a missing After or Sync shows there as stale results.
type Stream struct {
	dev         *Device
	s           stream // the zero stream is the default stream
	start, stop event  // Begin and End's timing events
	mark        event  // After's event
}

// newStreamOn wraps s with its events.
func newStreamOn(d *Device, s stream) (*Stream, error) {
	st := &Stream{dev: d, s: s}
	for _, e := range []struct {
		ev     *event
		timing bool
	}{{&st.start, true}, {&st.stop, true}, {&st.mark, false}} {
		var err error
		if *e.ev, err = d.drv.newEvent(e.timing); err != nil {
			return nil, fmt.Errorf("%w: cuEventCreate on device %d: %v", ErrDevice, d.Ordinal, err)
		}
	}
	return st, nil
}

// NewStream creates a stream on d that does not synchronise with its
// default stream.
func (d *Device) NewStream() (*Stream, error) {
	var st *Stream
	err := d.Do(func() error {
		s, err := d.drv.newStream()
		if err != nil {
			return fmt.Errorf("%w: cuStreamCreate on device %d: %v", ErrDevice, d.Ordinal, err)
		}
		st, err = newStreamOn(d, s)
		return err
	})
	return st, err
}

// Default is d's default stream, for other streams to wait for with After.
func (d *Device) Default() *Stream { return d.def }

// Launch queues kernel name on s (see Device.Run for the arguments).
func (s *Stream) Launch(name string, gx, gy, block int, args ...any) error {
	words, err := launchWords(name, gx, gy, block, args)
	if err != nil {
		return err
	}
	return s.dev.Do(func() error { return s.launch(name, gx, gy, block, words) })
}

// launch queues a checked launch; it runs inside Do.
func (s *Stream) launch(name string, gx, gy, block int, words []uint64) error {
	if err := s.dev.drv.launch(s.s, name, gx, gy, block, words); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDevice, name, err)
	}
	return nil
}

// After makes the work queued on s from now on wait for the work queued on
// o so far.
func (s *Stream) After(o *Stream) error {
	return s.dev.Do(func() error {
		if err := s.dev.drv.record(o.mark, o.s); err != nil {
			return fmt.Errorf("%w: cuEventRecord: %v", ErrDevice, err)
		}
		if err := s.dev.drv.wait(s.s, o.mark); err != nil {
			return fmt.Errorf("%w: cuStreamWaitEvent: %v", ErrDevice, err)
		}
		return nil
	})
}

// Begin starts timing the work queued on s from now on.
func (s *Stream) Begin() error { return s.dev.Do(s.begin) }

func (s *Stream) begin() error {
	if err := s.dev.drv.record(s.start, s.s); err != nil {
		return fmt.Errorf("%w: cuEventRecord: %v", ErrDevice, err)
	}
	return nil
}

// End waits for the work queued on s since Begin, adds its GPU time to
// the device's BusySeconds, and returns the first fault in it.
func (s *Stream) End() error { return s.dev.Do(s.end) }

func (s *Stream) end() error {
	drv := s.dev.drv
	if err := drv.record(s.stop, s.s); err != nil {
		return fmt.Errorf("%w: cuEventRecord: %v", ErrDevice, err)
	}
	if err := drv.syncEvent(s.stop); err != nil {
		return fmt.Errorf("%w: cuEventSynchronize: %v", ErrDevice, err)
	}
	sec, err := drv.elapsed(s.start, s.stop)
	if err != nil {
		return fmt.Errorf("%w: cuEventElapsedTime: %v", ErrDevice, err)
	}
	s.dev.busy += sec
	return nil
}

// Sync waits for everything queued on s and returns the first fault in it.
func (s *Stream) Sync() error {
	return s.dev.Do(func() error {
		if err := s.dev.drv.syncStream(s.s); err != nil {
			return fmt.Errorf("%w: cuStreamSynchronize: %v", ErrDevice, err)
		}
		return nil
	})
}

// Download2DAsync queues on s the copy Download2D makes. dst must be
// pinned host memory (HostFloat32) for the copy to overlap other work, and
// must not be read before s's work is waited for.
func Download2DAsync[T any](s *Stream, dst []T, dpitch int, src DevicePtr, spitch, rows, cols int) error {
	if rows <= 0 || cols <= 0 {
		return nil
	}
	if err := check2D(len(dst), dpitch, spitch, rows, cols); err != nil {
		return err
	}
	sz := int64(unsafe.Sizeof(dst[0]))
	return s.dev.Do(func() error {
		if err := s.dev.drv.toHost2DAsync(s.s, unsafe.Pointer(&dst[0]), int64(dpitch)*sz, src, int64(spitch)*sz, int64(cols)*sz, int64(rows)); err != nil {
			return fmt.Errorf("%w: queueing a copy of %d×%d bytes from the device: %v", ErrDevice, rows, int64(cols)*sz, err)
		}
		return nil
	})
}
