// Package ops holds tapeloop's custom Gorgonia operations: the kernels that
// carry each workload's heavy work.
//
// Every op owns its output buffer: it is allocated on the op's first Do and
// refilled on every later one, so a TapeMachine replaying a graph of these
// ops does not allocate per batch (Gorgonia's own TapeMachine drops and
// re-allocates intermediates on every run). An op's CPU implementation lives
// in ops/NAME.go; its CUDA twin beside it in ops/NAME_cuda.go under the
// tapeloop_cuda build tag (OnDevice picks it), with its kernels in
// cuda/kernels/*.cu and their launch argument lists in kernels.go, shared
// with the tests that run the kernels on the CPU (emu_test.go).
//
// Ops report the memory they hold beyond their output (tables, scratch) by
// implementing Resident, which the planner in package graphs adds up.
package ops

import (
	"hash"
	"hash/fnv"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"gorgonia.org/tensor"
)

// Resident is implemented by ops that hold memory besides their output:
// precomputed tables or scratch buffers, in bytes.
type Resident interface {
	ResidentBytes() int64
}

// DeviceResident is implemented by the GPU twins: the GPU memory their
// arena takes (allocated at the first run), which the planner holds to the
// memory limit as it holds host memory. ResidentBytes stays the host
// memory the op keeps.
type DeviceResident interface {
	DeviceBytes() int64
}

// Owner is implemented by ops whose output buffer is theirs for the life of
// the op: a Program reads such an output in place, valid until the next
// run, instead of copying it into a result buffer.
type Owner interface {
	OwnsOutput() bool
}

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
