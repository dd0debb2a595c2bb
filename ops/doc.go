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

// FullWriter is implemented by the pairwise op's GPU twin: given the whole
// (N, N) float32 matrix of a symmetric run, WriteFull reports whether its
// blocks (with Upper) will be written straight into it, each block's rows
// from the diagonal on and their transposes in the rows below, so that the
// caller need not mirror them; its output tensor is then not written.
// FuseMatrix turns such an op into PairwiseMatrix.
type FullWriter interface {
	WriteFull(full []float32) bool
}

// TopKSelector is implemented by the pairwise op's GPU twin: SelectTopK
// reports whether it will select the top k of each of its blocks' rows on
// the device, as TopK does (self skipped, ties to the smaller column). Its
// block output then holds, in each row, only those k values at their
// columns, and TopIndices is the (Batch, k) columns, as TopK's output.
// FuseTopK turns such an op into PairwiseTopK.
type TopKSelector interface {
	SelectTopK(k int) bool
	TopIndices() *tensor.Dense
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
