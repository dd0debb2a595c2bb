package engine

// RunsOnCaller reports whether p runs its tape on the calling goroutine
// (RunOnCaller), not with gorgonia's RunAll.
func (p *Program) RunsOnCaller() bool {
	_, ok := p.tape.(runAll)
	return !ok
}

// runAll runs a machine with gorgonia's RunAll.
type runAll struct{ vm interface{ RunAll() error } }

func (r runAll) RunOnCaller() error { return r.vm.RunAll() }

// UseRunAll makes p run its tape with gorgonia's RunAll (on) or again on
// the caller (off).
func (p *Program) UseRunAll(on bool) {
	if on {
		p.tape = runAll{p.vm}
		return
	}
	p.tape = p.vm.(tapeRunner)
}
