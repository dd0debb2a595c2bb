package engine

import "reflect"

// RunsOnCaller reports whether p runs its tape on the calling goroutine
// (the machine's Run), not with gorgonia's RunAll.
func (p *Program) RunsOnCaller() bool { return p.tape.run.IsValid() }

// onCaller keeps each program's Run method while it uses RunAll.
var onCaller = map[*tapeRun]reflect.Value{}

// UseRunAll makes p run its tape with gorgonia's RunAll (on) or again on
// the caller (off).
func (p *Program) UseRunAll(on bool) {
	t := p.tape
	if on {
		if t.run.IsValid() {
			onCaller[t] = t.run
		}
		t.run = reflect.Value{}
		return
	}
	if r, ok := onCaller[t]; ok {
		t.run = r
	}
}
