package wavelet

import "github.com/tapeloop/tapeloop/ops"

// JobSource is the volume's source j sweeps, for the tests of package
// wavelet_test.
func JobSource(j *Job) *ops.WaveletSource { return j.cfg.Src }

// ProgramSource is the volume's source p holds now: a new one after a
// recompile.
func ProgramSource(p *Program) *ops.WaveletSource { return p.src }
