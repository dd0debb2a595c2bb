package wavelet

import (
	"fmt"
	"sync"
	"time"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

// Program is a wavelet sweep of one volume, compiled once: each Run
// sweeps any (θ, φ, ξ) grid, batch by batch, replaying the same program
// over the same volume, transformed once per padding.
//
// In reflect mode the program holds the volume's source for the largest
// padding it has needed so far: a sweep that needs more (a wider kernel)
// rebuilds the source for it and compiles the program again, once, and the
// program keeps that size, so it grows to the largest sweep it has seen. The
// source's padding only sizes its buffers: each combination runs with its
// own (Pads), so the results do not depend on it. Wrap mode never
// recompiles.
type Program struct {
	ses *engine.Session
	// mu guards ses against Interrupt, Report and DOT while Run replaces it.
	mu   sync.Mutex
	src  *ops.WaveletSource
	v    []float32
	n    [3]int
	a    float64
	fail bool
	xy   bool     // the volume's first two axes are swapped (Indexing "xy")
	cols []string // Config.Columns
	dev  *engine.Device
	// cache keeps the volume's transforms for the paddings used lately,
	// across calls and recompiles.
	cache *ops.VolumeCache
	// memo keeps each computed kernel's statistics (by kernel and
	// padding: memoKey) across calls, so that calls of one combination
	// each compute what one call of them all computes.
	memo map[string][]byte
	// costs are what the calls of one combination measured, and rent
	// what they paid, per padding, for running on a transform wider than
	// their own (choose).
	costs costs
	rent  map[[3]int]float64
	// small counts the calls in a row that needed at most half of the
	// source's padded size; need is the largest padding they needed.
	small int
	need  [3]int
	names []string
	place []int
}

// Compile checks cfg and compiles the sweep of the volume v (copied) of
// shape n on dev (nil: the CPU) for batches of dev's batch of
// combinations (0: planned under its memory limit); the sweeps come with
// each Run. In reflect mode the volume's source starts with the padding
// of the round hat (θ = φ = 0, ξ = 1) and grows with the sweeps
// (Program).
func Compile(cfg Config, v []float32, n [3]int, dev *engine.Device) (_ *Program, err error) {
	if dev, err = engine.InProcess(dev); err != nil {
		return nil, err
	}
	p, err := cfg.Parse()
	if err != nil {
		return nil, err
	}
	if n[0] < 1 || n[1] < 1 || n[2] < 1 || sysmem.Mul(int64(n[0]), int64(n[1]), int64(n[2])) != int64(len(v)) {
		return nil, fmt.Errorf("--volume: need an (X, Y, Z) array, got %d values for shape %v", len(v), n)
	}
	// The volume as the sweep computes on it (Indexing), copied.
	v, n = p.Arrange(append([]float32(nil), v...), n)
	formulas, err := p.Formulas(n, dev.GPU())
	if err != nil {
		return nil, err
	}
	// The round hat's padding to start with, or the kernel formula's for
	// θ = φ = 0, ξ = 1 when it decays within the volume.
	round := []Combo{{0, 0, 1}}
	sup, err := Supports(cfg.A, formulas.KernelFormula(), round)
	if err != nil {
		sup = [][3]int{{}}
	}
	_, pad := Pads(n, cfg.A, round, sup)
	if err := CheckPadding(n, pad, dev.MemLimit); err != nil {
		return nil, err
	}
	prog := &Program{v: v, n: n, a: cfg.A, fail: cfg.FailOnNonFinite, xy: p.xy, cols: cfg.Columns, dev: dev, memo: map[string][]byte{}, rent: map[[3]int]float64{}}
	prog.cache = &ops.VolumeCache{Budget: cacheBudget(dev.MemLimit)}
	if prog.src, err = ops.NewWaveletSource(prog.v, n, cfg.A, p.Boundary, pad); err != nil {
		return nil, err
	}
	prog.src.Formulas = formulas
	prog.src.Cache = prog.cache
	var job *Job
	if prog.ses, job, err = prog.compile(prog.src); err != nil {
		return nil, err
	}
	prog.names, prog.place = job.columns()
	return prog, nil
}

// compile compiles the sweep over src, and returns the job it compiled:
// the round hat, a stand-in: the sweeps come with each call.
func (p *Program) compile(src *ops.WaveletSource) (*engine.Session, *Job, error) {
	job, err := New(Setup{Src: src, Combos: []Combo{{0, 0, 1}}, FailOnNonFinite: p.fail, Columns: p.cols})
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
// header, theta, phi, xi, the built-in statistics of Config.Columns
// (energy, std, max, wavelet_energy) and the user's statistics.
func (p *Program) Columns() []string { return append([]string(nil), p.names...) }

// Run sweeps every combination of theta, phi and xi, θ outermost, then φ,
// then ξ (as the CLI's --theta, --phi and --xi), into dst: a row of
// len(Columns()) values per combination, in that order, each the number
// the CLI writes in its CSV for the same volume and sweep. A sweep wider
// than any before it in reflect mode recompiles the program first (see
// Program). Nothing is kept after Run returns.
func (p *Program) Run(theta, phi, xi []float64, dst []float64) error {
	return p.RunRange(theta, phi, xi, 0, 0, dst)
}

// RunRange is Run of the combinations [lo, hi) of the sweep only (a
// shard; hi = 0: all of them), dst holding hi − lo rows. Each row is the
// number the whole sweep gives its combination, and the CLI's shard of
// the same range, bit for bit: the paddings and the kernels shared are
// those of the whole sweep.
func (p *Program) RunRange(theta, phi, xi []float64, lo, hi int, dst []float64) error {
	combos, err := Sweep(p.a, theta, phi, xi)
	if err != nil {
		return err
	}
	ranged := hi != 0
	if !ranged {
		lo, hi = 0, len(combos)
	}
	if lo < 0 || hi > len(combos) || lo >= hi {
		return fmt.Errorf("%w: combinations [%d, %d) of a sweep of %d", engine.ErrBatch, lo, hi, len(combos))
	}
	w := len(p.names)
	if len(dst) != (hi-lo)*w {
		return fmt.Errorf("%w: out has %d values, want %d combinations × %d columns", engine.ErrBatch, len(dst), hi-lo, w)
	}
	sup, err := Supports(p.a, KernelOf(p.src), combos)
	if err != nil {
		return err
	}
	pads, pad := Pads(p.n, p.a, combos, sup)
	if err := CheckPadding(p.n, pad, p.dev.MemLimit); err != nil {
		return err
	}
	// A call of one combination (a NumPy loop's) runs on a transform of
	// the volume chosen by what the calls so far measured (choose). Its
	// statistics then agree with a sweep's to rounding; a call of several
	// gives the CLI's, bit for bit.
	single := len(combos) == 1 && !ranged
	if single && p.src.Boundary == ops.Reflect && Computable(p.a, combos[0]) == nil {
		pads[0] = p.choose(combos[0], pads[0])
		pad = pads[0]
	}
	began, built := time.Now(), p.built()
	src := p.src
	if err := p.fit(pad); err != nil {
		return err
	}
	p.src.MaxSupport, p.src.Narrow = MaxSupport(sup), AnyNarrow(p.a, combos)
	job, err := New(Setup{Src: p.src, Combos: combos, Lo: lo, Hi: hi, FailOnNonFinite: p.fail, Columns: p.cols, Padding: func([][3]int) [][3]int { return pads }})
	if err != nil {
		return err
	}
	// A call of one combination does not compute again a kernel an
	// earlier call computed.
	restore, drop := job.Restorer()
	var todo []int
	for _, i := range job.order {
		if rec, ok := p.memo[job.memoKey(i)]; ok && single {
			if err := restore(i, rec); err != nil {
				return err
			}
		} else {
			todo = append(todo, i)
		}
	}
	drop()
	if err := p.ses.Run(job); err != nil {
		return err
	}
	for _, i := range todo {
		if k := job.memoKey(i); k != "" {
			if len(p.memo) >= maxMemo {
				clear(p.memo)
			}
			p.memo[k] = job.record(i)
		}
	}
	if single {
		p.measure(time.Since(began).Seconds(), built, pads[0], len(todo) == 1 && p.src == src)
	}
	for i := lo; i < hi; i++ {
		job.values(dst[(i-lo)*w:(i-lo+1)*w], i, p.place)
	}
	return nil
}

// choose returns the padding a call of the combination c, whose own
// padding is q, runs with: a transform of the volume the cache holds that
// covers q at no more than reuseRatio times the size of its own, or a new
// one, priced by what the calls so far measured (costs). A transform held
// whose statistics of c are known (memo) costs nothing. Otherwise the
// smallest held transform covering q serves, and the work it costs beyond
// q's own size is rent: once the rent the calls of padding q paid would
// exceed what making a transform of q's own size costs, the call makes
// that one (ski rental: never more than twice the cost of the better
// choice in hindsight). Where none covers q, the call makes one as wide
// along every axis when that is at most reuseRatio times its own, which
// the same kernel turned another way will find, else one of its own size.
func (p *Program) choose(c Combo, q [3]int) [3]int {
	own := p.size(q)
	var best [3]int
	found := false
	f := p.src.Formulas
	for _, d := range p.cache.Paddings(p.n) {
		if d[0] < q[0] || d[1] < q[1] || d[2] < q[2] || p.size(d) > reuseRatio*own {
			continue
		}
		if k := memoKey(f, c, d); k != "" && p.memo[k] != nil {
			return d
		}
		if !found || p.size(d) < p.size(best) {
			best, found = d, true
		}
	}
	if found {
		extra := p.size(best) - own
		if extra <= 0 {
			return best
		}
		if p.rent[q]+extra <= p.costs.ratio()*own {
			if len(p.rent) >= maxRent {
				clear(p.rent)
			}
			p.rent[q] += extra
			return best
		}
		delete(p.rent, q)
		return q
	}
	m := max(q[0], q[1], q[2])
	if cube := p.full([3]int{m, m, m}); p.size(cube) <= reuseRatio*own {
		return cube
	}
	return q
}

// built is what the cache's transforms took so far (ops.VolumeCache.Built).
func (p *Program) built() [2]float64 {
	_, e, s := p.cache.Built()
	return [2]float64{e, s}
}

// measure updates the costs with a call of one combination that took
// secs seconds and made the transforms the cache's count grew by since
// before (built); with work, the call computed its kernel on the
// transform for padding pad and did nothing else (no recompile).
func (p *Program) measure(secs float64, before [2]float64, pad [3]int, work bool) {
	now := p.built()
	elems, bsecs := now[0]-before[0], now[1]-before[1]
	if elems > 0 {
		p.costs.build = average(p.costs.build, bsecs/elems, 4)
	}
	if w := secs - bsecs; w > 0 && work {
		p.costs.work = average(p.costs.work, w/p.size(pad), 16)
	}
}

// costs are what the calls of one combination measured, in seconds per
// element of a transform of the volume: a combination's work on it, and
// making it (the arrays' first touch included); running averages, zero
// until measured.
type costs struct{ work, build float64 }

// ratio is what making a transform costs in combinations on it: the
// measured ratio, or volumeCost (the batched sweep's) until both costs
// are measured.
func (c costs) ratio() float64 {
	if c.work > 0 && c.build > 0 {
		return c.build / c.work
	}
	return volumeCost
}

// average is a running average of measurements x over about the last n,
// the latest weighing 1/n; the first is taken as it is. A combination's
// work, measured at every call, is averaged over more calls than the
// transforms, made seldom, so that a call slowed by another process
// weighs little.
func average(avg, x, n float64) float64 {
	if avg == 0 {
		return x
	}
	return avg + (x-avg)/n
}

// maxRent bounds the paddings whose rent a Program keeps (choose).
const maxRent = 1 << 12

// maxMemo bounds the kernels' statistics a Program keeps between calls
// (about 50 MiB of them at most).
const maxMemo = 1 << 20

// cacheBudget is what a Program may hold in the volume's transforms
// between calls: a quarter of its memory limit (1 GiB without one).
func cacheBudget(limit int64) int64 {
	if limit <= 0 {
		return 1 << 30
	}
	return limit / 4
}

// shrinkAfter is how many calls in a row must need at most half of the
// source's padded size before fit shrinks it.
const shrinkAfter = 32

// size is the element count of the volume's transform for padding q.
func (p *Program) size(q [3]int) float64 {
	d := 1.0
	for k := range 3 {
		d *= float64(ops.FFTSize(p.n[k] + 2*q[k]))
	}
	return d
}

// full is the padding q's transform size leaves, (size − n)/2 along each
// axis, as Pads gives it: paddings of one transform size run on one
// transform of the volume.
func (p *Program) full(q [3]int) [3]int {
	for k := range 3 {
		q[k] = (ops.FFTSize(p.n[k]+2*q[k]) - p.n[k]) / 2
	}
	return q
}

// fit sizes the source for a call that needs the padding pad: larger
// when pad is beyond it (grow); smaller, for the largest padding they
// needed, after shrinkAfter calls in a row that each needed at most half
// of its padded size, so that a program does not hold the widest padding
// it was ever asked for while calls of mixed sizes (a loop over ξ) do not
// rebuild it each time.
func (p *Program) fit(pad [3]int) error {
	if p.src.Boundary != ops.Reflect {
		return nil
	}
	if 2*p.size(pad) > p.size(p.src.MaxPad) {
		p.small, p.need = 0, [3]int{}
		return p.grow(pad)
	}
	p.small++
	for k := range 3 {
		p.need[k] = max(p.need[k], pad[k])
	}
	if p.small < shrinkAfter {
		return nil
	}
	need := p.need
	p.small, p.need = 0, [3]int{}
	p.cache.Release() // its scratch is the widest transform's
	return p.rebuild(need)
}

// Response writes the response G of the combination θ, φ, ξ to dst, the
// volume's shape (as given to Compile), C order: the convolution whose
// statistics Run gives, on the CPU.
func (p *Program) Response(theta, phi, xi float64, dst []float32) error {
	c := []Combo{{theta, phi, xi}}
	if err := Computable(p.a, c[0]); err != nil {
		return err
	}
	if len(dst) != len(p.v) {
		return fmt.Errorf("%w: out has %d values, want the volume's %d", engine.ErrBatch, len(dst), len(p.v))
	}
	sup, err := Supports(p.a, KernelOf(p.src), c)
	if err != nil {
		return err
	}
	pads, pad := Pads(p.n, p.a, c, sup)
	if err := CheckPadding(p.n, pad, p.dev.MemLimit); err != nil {
		return err
	}
	if err := p.grow(pad); err != nil {
		return err
	}
	if !p.xy {
		return p.src.Response(dst, theta, phi, xi, pads[0])
	}
	g := make([]float32, len(dst))
	if err := p.src.Response(g, theta, phi, xi, pads[0]); err != nil {
		return err
	}
	g, _ = SwapXY(g, p.n, false)
	copy(dst, g)
	return nil
}

// grow rebuilds the source for the padding pad and compiles the program
// again when pad is beyond the source's in reflect mode; the new program
// replaces the old one only once it is compiled.
func (p *Program) grow(pad [3]int) error {
	old := p.src
	if old.Boundary != ops.Reflect || pad[0] <= old.MaxPad[0] && pad[1] <= old.MaxPad[1] && pad[2] <= old.MaxPad[2] {
		return nil
	}
	// The same along every axis: a kernel turned another way needs as much
	// along another axis, and need not rebuild the source again.
	m := max(pad[0], pad[1], pad[2], old.MaxPad[0], old.MaxPad[1], old.MaxPad[2])
	return p.rebuild([3]int{m, m, m})
}

// rebuild makes the source for the padding pad and compiles the program
// again; the new program replaces the old one only once it is compiled.
func (p *Program) rebuild(pad [3]int) error {
	old := p.src
	if pad == old.MaxPad {
		return nil
	}
	src, err := ops.NewWaveletSource(p.v, p.n, p.a, ops.Reflect, pad)
	if err != nil {
		return err
	}
	src.Formulas = old.Formulas
	src.Cache = old.Cache
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
func (p *Program) Interrupt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ses.Interrupt()
}

// Close releases the program.
func (p *Program) Close() error { return p.ses.Close() }

// Report says how the calls so far went.
func (p *Program) Report() engine.Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ses.Report()
}

// DOT is the compiled graph as Graphviz DOT.
func (p *Program) DOT() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ses.DOT()
}

// reuseRatio bounds how much larger than its own a transform a call of
// one combination runs on: a new one, made for the calls after it, costs
// about as much as the transform the next kernel turned another way would
// need; one held, where calls of narrow kernels would otherwise keep the
// widest transform in use (fit shrinks the source after calls that need
// at most half of it).
const reuseRatio = 2
