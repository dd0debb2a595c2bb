package graphs

import (
	"fmt"
	"sync"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

// WaveletProgram is a wavelet sweep of one volume, compiled once: each Run
// sweeps any (θ, φ, ξ) grid, batch by batch, replaying the same program
// over the same volume, transformed once per padding.
//
// In reflect mode the program holds the volume's source for the largest
// padding it has needed so far: a sweep that needs more (a wider kernel)
// rebuilds the source for it and compiles the program again, once, and the
// program keeps that size, so it grows to the largest sweep it has seen. The
// source's padding only sizes its buffers: each combination runs with its
// own (WaveletPads), so the results do not depend on it. Wrap mode never
// recompiles.
type WaveletProgram struct {
	ses *engine.Session
	// mu guards ses against Interrupt, Report and DOT while Run replaces it.
	mu    sync.Mutex
	src   *ops.WaveletSource
	v     []float32
	n     [3]int
	a     float64
	fail  bool
	dev   *engine.Device
	names []string
	place []int
}

// CompileWavelet validates s as the CLI does (its Volume, Size, Out and
// shard settings are not used: the volume is v, copied, of shape n, and
// the sweep comes with each Run) and compiles the sweep on dev (nil: the
// CPU) for batches of its batch of combinations (0: planned under its
// memory limit). In
// reflect mode the volume's source starts with the padding of the round
// hat (θ = φ = 0, ξ = 1) and grows with the sweeps (WaveletProgram).
func CompileWavelet(s WaveletSpec, v []float32, n [3]int, dev *engine.Device) (_ *WaveletProgram, err error) {
	if dev, err = engine.InProcess(dev); err != nil {
		return nil, err
	}
	s.Volume, s.Size, s.Out, s.Stdout, s.Shard, s.Shards, s.Env, s.Resume = "(array)", "", "", nil, nil, nil, nil, false
	s.Theta, s.Phi, s.Xi = "0", "0", "1" // the sweeps come with each Run
	p, err := s.parse()
	if err != nil {
		return nil, err
	}
	if n[0] < 1 || n[1] < 1 || n[2] < 1 || sysmem.Mul(int64(n[0]), int64(n[1]), int64(n[2])) != int64(len(v)) {
		return nil, fmt.Errorf("--volume: need an (X, Y, Z) array, got %d values for shape %v", len(v), n)
	}
	_, pad := WaveletPads(n, s.A, p.combos)
	if err := checkWaveletPadding(n, pad, dev.MemLimit); err != nil {
		return nil, err
	}
	prog := &WaveletProgram{v: append([]float32(nil), v...), n: n, a: s.A, fail: s.FailOnNonFinite, dev: dev}
	if prog.src, err = ops.NewWaveletSource(prog.v, n, s.A, p.boundary, pad); err != nil {
		return nil, err
	}
	if prog.src.Formulas, err = p.formulas(n, dev.GPU()); err != nil {
		return nil, err
	}
	var job *Wavelet
	if prog.ses, job, err = prog.compile(prog.src); err != nil {
		return nil, err
	}
	prog.names, prog.place = job.columns()
	return prog, nil
}

// compile compiles the sweep over src, and returns the job it compiled:
// the round hat, a stand-in: the sweeps come with each call.
func (p *WaveletProgram) compile(src *ops.WaveletSource) (*engine.Session, *Wavelet, error) {
	job, err := NewWavelet(WaveletConfig{Src: src, Combos: []Combo{{0, 0, 1}}, FailOnNonFinite: p.fail})
	if err != nil {
		return nil, nil, err
	}
	ses, err := engine.NewSession(job, p.dev, true)
	if err != nil {
		return nil, nil, err
	}
	return ses, job, nil
}

// Columns names the values of a row of Run's output: the CLI's CSV
// header, theta, phi, xi, energy, std, max, wavelet_energy and the user's
// statistics.
func (p *WaveletProgram) Columns() []string { return append([]string(nil), p.names...) }

// Run sweeps every combination of theta, phi and xi, θ outermost, then φ,
// then ξ (as the CLI's --theta, --phi and --xi), into dst: a row of
// len(Columns()) values per combination, in that order, each the number
// the CLI writes in its CSV for the same volume and sweep. A sweep wider
// than any before it in reflect mode recompiles the program first (see
// WaveletProgram). Nothing is kept after Run returns.
func (p *WaveletProgram) Run(theta, phi, xi []float64, dst []float64) error {
	for _, l := range [...]struct {
		name string
		v    []float64
	}{{"theta", theta}, {"phi", phi}, {"xi", xi}} {
		if len(l.v) == 0 {
			return fmt.Errorf("--%s: empty list", l.name)
		}
	}
	if c := sysmem.Mul(int64(len(theta)), int64(len(phi)), int64(len(xi))); c < 0 || c > maxCount {
		return fmt.Errorf("--theta × --phi × --xi: %d × %d × %d combinations; at most %d (2²⁴) in one run: split the sweep into several",
			len(theta), len(phi), len(xi), maxCount)
	}
	combos := Combos(theta, phi, xi)
	if err := checkCombos(p.a, combos); err != nil {
		return err
	}
	w := len(p.names)
	if len(dst) != len(combos)*w {
		return fmt.Errorf("%w: out has %d values, want %d combinations × %d columns", engine.ErrBatch, len(dst), len(combos), w)
	}
	_, pad := WaveletPads(p.n, p.a, combos)
	if err := checkWaveletPadding(p.n, pad, p.dev.MemLimit); err != nil {
		return err
	}
	if err := p.grow(pad); err != nil {
		return err
	}
	p.src.MaxSupport = maxSupport(p.a, combos)
	job, err := NewWavelet(WaveletConfig{Src: p.src, Combos: combos, FailOnNonFinite: p.fail})
	if err != nil {
		return err
	}
	if err := p.ses.Run(job); err != nil {
		return err
	}
	for i := range combos {
		job.values(dst[i*w:(i+1)*w], i, p.place)
	}
	return nil
}

// grow rebuilds the source for the padding pad and compiles the program
// again when pad is beyond the source's in reflect mode; the new program
// replaces the old one only once it is compiled.
func (p *WaveletProgram) grow(pad [3]int) error {
	old := p.src
	if old.Boundary != ops.Reflect || pad[0] <= old.MaxPad[0] && pad[1] <= old.MaxPad[1] && pad[2] <= old.MaxPad[2] {
		return nil
	}
	for k := range 3 {
		pad[k] = max(pad[k], old.MaxPad[k])
	}
	src, err := ops.NewWaveletSource(p.v, p.n, p.a, ops.Reflect, pad)
	if err != nil {
		return err
	}
	src.Formulas = old.Formulas
	ses, _, err := p.compile(src)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.src = src
	return p.ses.Recompiled(ses) // the calls so far stay counted
}

// Interrupt stops the call in progress, as session.Interrupt, also while
// Run recompiles.
func (p *WaveletProgram) Interrupt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ses.Interrupt()
}

// Close releases the program.
func (p *WaveletProgram) Close() error { return p.ses.Close() }

// Report says how the calls so far went.
func (p *WaveletProgram) Report() engine.Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ses.Report()
}

// DOT is the compiled graph as Graphviz DOT.
func (p *WaveletProgram) DOT() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ses.DOT()
}
