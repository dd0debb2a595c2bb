package engine

import "reflect"

// RunsOnCaller reports whether p runs its tape on the calling goroutine
// (the machine's Run), not with gorgonia's RunAll.
func (p *Program) RunsOnCaller() bool { return p.tape.run.IsValid() }

// UseRunAll makes p run its tape with gorgonia's RunAll.
func (p *Program) UseRunAll() { p.tape.run = reflect.Value{} }
