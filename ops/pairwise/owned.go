package pairwise

import (
	"hash"
	"hash/fnv"
	"math"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// The small helpers every op shares, copied from package ops.

// owned answers the Op methods every tapeloop CPU op answers alike: it
// returns its own buffer (not a pointer into an input), calls nothing
// external, overwrites no input, and owns its output (Owner).
type owned struct{}

// ReturnsPtr is false: the output is the op's own buffer.
func (owned) ReturnsPtr() bool { return false }

// CallsExtern is false: the op runs on the CPU.
func (owned) CallsExtern() bool { return false }

// OverwritesInput is -1: inputs are left as they are.
func (owned) OverwritesInput() int { return -1 }

// OwnsOutput is true: the output is read in place.
func (owned) OwnsOutput() bool { return true }

// hashcode is the FNV-1a hash of what an op writes in WriteHash.
func hashcode(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

// newOwned allocates an op's output buffer, backed by huge pages where the
// kernel allows, so that its first fill does not fault 4 KiB at a time.
func newOwned(dt tensor.Dtype, shape ...int) *tensor.Dense {
	n := tensor.Shape(shape).TotalSize()
	if dt == tensor.Float64 {
		b := make([]float64, n)
		sysmem.AdviseHugePagesOf(b)
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b))
	}
	b := make([]float32, n)
	sysmem.AdviseHugePagesOf(b)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b))
}

func countBad[T float32 | float64](v []T) int64 {
	var c int64
	for _, x := range v {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			c++
		}
	}
	return c
}

// stoppable implements ops.Stopper for the ops that embed it.
type stoppable struct{ flag *atomic.Bool }

// SetStop sets the flag the op checks between blocks of work.
func (s *stoppable) SetStop(flag *atomic.Bool) { s.flag = flag }

// stopped reports whether the op should stop.
func (s *stoppable) stopped() bool { return s.flag != nil && s.flag.Load() }
