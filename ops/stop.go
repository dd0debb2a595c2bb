package ops

import (
	"errors"
	"sync/atomic"
)

// Stopper is implemented by ops whose single run can take long (a batch of
// DRRs, a block of affinity rows, a batch of wavelet kernels): the engine
// hands them a flag that it sets when the run's context is done, and they
// check it between blocks of work and return ErrStopped.
type Stopper interface {
	SetStop(flag *atomic.Bool)
}

// ErrStopped is returned by an op whose stop flag was set during its run.
var ErrStopped = errors.New("ops: stopped")
