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
// implementing Resident, which the planner in internal/engine adds up.
package ops

import "github.com/tapeloop/tapeloop/ops/internal/opkit"

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

// The pieces every op is made of, shared with package ops/pairwise.
type (
	owned     = opkit.Owned
	stoppable = opkit.Stoppable
	launch    = opkit.Launch
)
