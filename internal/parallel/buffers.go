package parallel

// Buffers keeps slices between calls for the workers of a parallel loop,
// so that each call does not allocate its own: Get returns one of at least
// n elements (a kept one where it is long enough), Put keeps one for a
// later Get, up to the number given to NewBuffers. Safe for concurrent use.
type Buffers[T any] struct{ kept chan []T }

// NewBuffers returns a Buffers keeping up to keep slices.
func NewBuffers[T any](keep int) *Buffers[T] {
	return &Buffers[T]{kept: make(chan []T, max(1, keep))}
}

// Get returns a slice of at least n elements, not cleared.
func (b *Buffers[T]) Get(n int) []T {
	var s []T
	select {
	case s = <-b.kept:
	default:
	}
	if len(s) < n {
		s = make([]T, n)
	}
	return s
}

// Put keeps s for a later Get, unless enough are kept.
func (b *Buffers[T]) Put(s []T) {
	select {
	case b.kept <- s:
	default:
	}
}
