package engine

import (
	"reflect"
	"unsafe"

	G "gorgonia.org/gorgonia"
)

// tapeRun runs a compiled TapeMachine's whole program once.
//
// Gorgonia's RunAll locks the calling goroutine to its thread (where its
// own CUDA build keeps a context) and runs the program on a new goroutine
// while it waits: every run moves the work to another thread and back,
// and on a small VM each of those hand-offs wakes a sleeping core. For a
// batch of a few tens of microseconds of work that doubles its time.
// tapeloop's ops need no locked thread (a CUDA op runs its calls on its
// device's own thread), so the engine runs the tape on the calling
// goroutine instead, with the machine's own Run, which executes the same
// instructions in the same order. Run takes the program's instructions,
// whose type gorgonia does not export; newTapeRun reaches them by
// reflection once per Program and falls back to RunAll when the machine is
// not built as expected (another gorgonia version).
type tapeRun struct {
	vm   G.VM
	run  reflect.Value   // the machine's Run method; the zero Value: use RunAll
	args []reflect.Value // its argument, the program's instructions
}

var errorType = reflect.TypeFor[error]()

// newTapeRun prepares vm, a machine from G.NewTapeMachine, to be run on
// the caller.
func newTapeRun(vm G.VM) *tapeRun {
	t := &tapeRun{vm: vm}
	v := reflect.ValueOf(vm)
	prog, run := v.MethodByName("Prog"), v.MethodByName("Run")
	if !prog.IsValid() || !run.IsValid() {
		return t
	}
	pt, rt := prog.Type(), run.Type()
	if pt.NumIn() != 0 || pt.NumOut() != 1 || rt.NumIn() != 1 || rt.NumOut() != 1 || rt.Out(0) != errorType {
		return t
	}
	p := prog.Call(nil)[0]
	if p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Struct {
		return t
	}
	f := p.Elem().FieldByName("instructions")
	if !f.IsValid() || f.Type() != rt.In(0) || f.Kind() != reflect.Slice {
		return t
	}
	// The field is read through its address: reflection refuses to pass a
	// value read from an unexported field as an argument.
	t.run = run
	t.args = []reflect.Value{reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()}
	return t
}

// Run executes the program. The caller resets the machine afterwards.
func (t *tapeRun) Run() error {
	if !t.run.IsValid() {
		return t.vm.RunAll()
	}
	if e := t.run.Call(t.args)[0].Interface(); e != nil {
		return e.(error)
	}
	// What RunAll does after the program: flush work batched for external
	// engines (none on the CPU).
	if w, ok := t.vm.(interface{ DoWork() error }); ok {
		return w.DoWork()
	}
	return nil
}
