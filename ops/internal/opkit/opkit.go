package opkit

import (
	"hash"
	"hash/fnv"
	"math"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Owned answers the Op methods every tapeloop CPU op answers alike: it
// returns its own buffer (not a pointer into an input), calls nothing
// external, overwrites no input, and owns its output (ops.Owner).
type Owned struct{}

// ReturnsPtr is false: the output is the op's own buffer.
func (Owned) ReturnsPtr() bool { return false }

// CallsExtern is false: the op runs on the CPU.
func (Owned) CallsExtern() bool { return false }

// OverwritesInput is -1: inputs are left as they are.
func (Owned) OverwritesInput() int { return -1 }

// OwnsOutput is true: the output is read in place.
func (Owned) OwnsOutput() bool { return true }

// Hashcode is the FNV-1a hash of what an op writes in WriteHash.
func Hashcode(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

// NewOwned allocates an op's output buffer, backed by huge pages where the
// kernel allows, so that its first fill does not fault 4 KiB at a time.
func NewOwned(dt tensor.Dtype, shape ...int) *tensor.Dense {
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

// CountBad counts the NaN and infinite values of v.
func CountBad[T float32 | float64](v []T) int64 {
	var c int64
	for _, x := range v {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			c++
		}
	}
	return c
}

// Stoppable implements ops.Stopper for the ops that embed it.
type Stoppable struct{ flag *atomic.Bool }

// SetStop sets the flag the op checks between blocks of work.
func (s *Stoppable) SetStop(flag *atomic.Bool) { s.flag = flag }

// Stopped reports whether the op should stop.
func (s *Stoppable) Stopped() bool { return s.flag != nil && s.flag.Load() }

// Launch is one kernel launch: GX×GY blocks of Block threads, the
// kernel's arguments in order. Integers are int64 and reals float64: every
// kernel parameter is 8 bytes wide.
type Launch struct {
	Kernel        string
	GX, GY, Block int
	Args          []any
}

// Blocks is the number of blocks of block threads that cover n.
func Blocks(n, block int) int { return (n + block - 1) / block }
