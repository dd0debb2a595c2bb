package engine

import (
	"errors"

	G "gorgonia.org/gorgonia"
)

// tapeRunner is a TapeMachine that runs its whole program on the calling
// goroutine.
//
// Gorgonia's RunAll locks the calling goroutine to its thread (where its
// own CUDA build keeps a context) and runs the program on a new goroutine
// while it waits: every run moves the work to another thread and back.
// On two cores that made the interpolation's batches of 0.05 to 0.5 ms 10
// to 90 % slower (BenchmarkTapeHandOff compares the two). tapeloop's ops
// need no locked thread (a CUDA op runs its calls on its device's own
// thread), so the engine runs the tape with RunOnCaller, which executes
// the same instructions in the same order as RunAll, on the caller.
// Gorgonia v0.9.18 has no such method: the module is replaced by the copy
// in third_party/gorgonia, which adds it (see go.mod).
type tapeRunner interface {
	RunOnCaller() error
}

var errNoRunOnCaller = errors.New("engine: gorgonia's TapeMachine has no RunOnCaller: build with the replace directive of tapeloop's go.mod")

// newTapeRunner is vm, a machine from G.NewTapeMachine, as a tapeRunner.
func newTapeRunner(vm G.VM) (tapeRunner, error) {
	r, ok := vm.(tapeRunner)
	if !ok {
		return nil, errNoRunOnCaller
	}
	return r, nil
}
