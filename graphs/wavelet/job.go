package wavelet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/ops"
)

// Setup is what a Job sweeps: the volume's source, the combinations and
// the range of them it computes.
type Setup struct {
	Src    *ops.WaveletSource
	Combos []Combo
	// FailOnNonFinite makes a NaN or infinite statistic of a run with
	// formulas an error.
	FailOnNonFinite bool
	// Lo and Hi restrict the run to the combinations [Lo, Hi) of Combos
	// (a shard; Hi = 0: all of them). Every combination gets the numbers
	// the whole sweep gives it: its padding and the combination whose
	// kernel it shares are found over all of Combos.
	Lo, Hi int
	// Padding, when set, may change the paddings the combinations run
	// with (Pads's), each to one at least as large along every axis.
	Padding func(pads [][3]int) [][3]int
	// Columns are the built-in statistics written, as Config.Columns (nil:
	// all). New sets Src.Skip to what the others alone need.
	Columns []string
}

// A Saver keeps the records of finished combinations (the file layer's
// checkpoint): items are indices into Combos, recs their records of
// Job.RecordBytes each, which Job.Restorer reads back.
type Saver interface {
	AppendItems(items []int, recs [][]byte) error
}

// Job is the wavelet sweep as an engine.Job: each batch is a set of
// kernels. In reflect mode each combination runs on the volume extended by
// what its own kernel needs (Pads), the combinations grouped by extension
// (one transform of the volume per group), and the results are put back in
// order.
type Job struct {
	cfg   Setup
	dev   ops.Device   // the response op's device (nil: the CPU)
	Stats [][4]float64 // energy, std, max, kernel energy, in Combos order
	// Extra holds the values of the user's statistics, in Combos order
	// (nil without any).
	Extra [][]float64
	order []int    // the order combinations run in
	pad   [][3]int // per combination: its padding in reflect mode
	same  [][]int  // per computed combination, the others with its kernel
	// nonFinite counts NaN or infinite statistics of a run with formulas.
	nonFinite int64
	// bad counts the combinations of [Lo, Hi) without a kernel (not
	// Computable), badWhy says why for the first of them.
	bad      int
	badWhy   error
	row      []byte
	computed int       // kernels the whole run convolves, resumed or not
	cols     ColumnSet // the built-in columns written
	// written marks the values of an output row of the graph (energy,
	// std, max, kernel energy, the user's statistics) that a CSV column
	// shows: the others may be left out (NaN).
	written  []bool
	csv      io.Writer // nil: no CSV
	noHeader bool
	saver    Saver // nil: no checkpoint
}

// New checks cfg and returns the Job.
func New(cfg Setup) (*Job, error) {
	if cfg.Src == nil {
		return nil, errors.New("wavelet: setup needs a volume")
	}
	if len(cfg.Combos) == 0 {
		return nil, fmt.Errorf("%w: no combinations", ops.ErrWavelet)
	}
	if err := ops.CheckHat(cfg.Src.A, 0, 0, 1); err != nil {
		return nil, err
	}
	if cfg.Hi == 0 {
		cfg.Lo, cfg.Hi = 0, len(cfg.Combos)
	}
	if cfg.Lo < 0 || cfg.Hi > len(cfg.Combos) || cfg.Lo >= cfg.Hi {
		return nil, fmt.Errorf("%w: combinations [%d, %d) of %d", ops.ErrWavelet, cfg.Lo, cfg.Hi, len(cfg.Combos))
	}
	w := &Job{cfg: cfg, Stats: make([][4]float64, len(cfg.Combos)), order: make([]int, len(cfg.Combos))}
	var statNames []string
	if f := cfg.Src.Formulas; f != nil {
		for _, st := range f.Stats {
			statNames = append(statNames, st.Name)
		}
	}
	var err error
	if w.cols, err = ParseColumns(cfg.Columns, statNames); err != nil {
		return nil, err
	}
	cfg.Src.Skip, w.written = skipFor(w.cols, cfg.Src.Formulas)
	if k := w.extra(); k > 0 {
		w.Extra = make([][]float64, len(cfg.Combos))
		for i := range w.Extra {
			w.Extra[i] = make([]float64, k)
		}
	}
	sup, err := Supports(cfg.Src.A, KernelOf(cfg.Src), cfg.Combos)
	if err != nil {
		return nil, err
	}
	w.pad, _ = Pads(cfg.Src.N, cfg.Src.A, cfg.Combos, sup)
	if cfg.Padding != nil {
		w.pad = cfg.Padding(w.pad)
	}
	// Combinations whose kernels are the same (the hat with ξ = 1 is
	// round: every θ and φ; otherwise its stretched axis n and −n) are
	// computed once, the first of each in Combos order (which may come
	// before Lo); the others of [Lo, Hi) take its statistics.
	w.order = w.order[:0]
	w.same = make([][]int, len(cfg.Combos))
	first := map[string]int{}
	computed := make([]bool, len(cfg.Combos))
	for i, c := range cfg.Combos[:cfg.Hi] {
		if err := Computable(cfg.Src.A, c); err != nil {
			if i >= cfg.Lo {
				w.uncomputable(i, err)
			}
			continue
		}
		key := kernelKey(c)
		if !sharesKernels(cfg.Src.Formulas) {
			key = ""
		}
		j, ok := first[key]
		if !ok || key == "" {
			first[key], j = i, i
		}
		if i < cfg.Lo {
			continue
		}
		if j != i {
			w.same[j] = append(w.same[j], i)
		}
		if !computed[j] {
			computed[j] = true
			w.order = append(w.order, j)
		}
	}
	if w.bad > 0 && cfg.FailOnNonFinite {
		return nil, fmt.Errorf("--fail-on-nonfinite: %d combinations have no kernel (the first: %w)", w.bad, w.badWhy)
	}
	sort.Ints(w.order)
	w.computed = len(w.order)
	if cfg.Src.Boundary == ops.Reflect {
		size := func(p [3]int) int { return (2*p[0] + 1) * (2*p[1] + 1) * (2*p[2] + 1) }
		sort.SliceStable(w.order, func(a, b int) bool {
			pa, pb := w.pad[w.order[a]], w.pad[w.order[b]]
			if size(pa) != size(pb) {
				return size(pa) < size(pb)
			}
			for k := range 3 { // same size: group equal paddings together
				if pa[k] != pb[k] {
					return pa[k] < pb[k]
				}
			}
			return false
		})
	}
	return w, nil
}

// skipFor is what a sweep that writes the built-in columns cols leaves
// out of the response op's results, and which values of an output row
// of the graph its CSV shows (Job.written): the built-in columns
// written and every statistic of the user's.
func skipFor(cols ColumnSet, f *ops.WaveletFormulas) (ops.WaveletSkip, []bool) {
	var skip ops.WaveletSkip
	written := append(make([]bool, 0, 4), cols[:]...)
	if f != nil {
		for range f.Stats {
			written = append(written, true)
		}
	}
	// energy and std are Σ G and Σ G²'s, max is max G; Σ ψ² is computed
	// whatever is asked (with the product of spectra, or from the
	// samples).
	skip.Sums = !written[0] && !written[1]
	skip.Max = !written[2]
	return skip, written
}

// Passes is what the response op runs per combination (ops.WaveletPasses),
// on a GPU (gpu) or the CPU. The GPU runs every pass: its columns are
// those of the CPU, the others are computed and not written.
func (w *Job) Passes(gpu bool) ops.WaveletPasses {
	if gpu {
		return ops.WaveletPasses{Sums: ops.SumsFromResponse, InverseTransform: true, Max: true, Formulas: []string{}}
	}
	return w.cfg.Src.Passes()
}

// countNonFinite counts the NaN or infinite values of row, an output row
// of the graph, that the CSV shows.
func (w *Job) countNonFinite(row []float64) int64 {
	var n int64
	for i, v := range row {
		if w.written[i] && (math.IsNaN(v) || math.IsInf(v, 0)) {
			n++
		}
	}
	return n
}

// sharesKernels reports whether combinations with the same built-in
// kernel may be computed once: not with a kernel formula, which may read
// θ, φ or the offsets themselves, nor with a statistic that reads θ or φ.
func sharesKernels(f *ops.WaveletFormulas) bool {
	if f == nil {
		return true
	}
	if f.Kernel != nil {
		return false
	}
	for _, st := range f.Stats {
		if st.ReadsOrientation() {
			return false
		}
	}
	return true
}

// Response writes the response G of combination i (an index into Combos)
// to dst, the volume's shape as the sweep computes on it, C order: on
// the CPU, extended by the padding the sweep gives it.
func (w *Job) Response(i int, dst []float32) error {
	c := w.cfg.Combos[i]
	return w.cfg.Src.Response(dst, c.Theta, c.Phi, c.Xi, w.pad[i])
}

// KernelOf is src's kernel formula, nil for the built-in hat.
func KernelOf(src *ops.WaveletSource) *ops.KernelFormula { return src.Formulas.KernelFormula() }

// uncomputable gives combination i, which has no kernel (err says why),
// NaN statistics.
func (w *Job) uncomputable(i int, err error) {
	if w.bad == 0 {
		w.badWhy = err
	}
	w.bad++
	w.Stats[i] = [4]float64{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	if w.Extra != nil {
		for k := range w.Extra[i] {
			w.Extra[i][k] = math.NaN()
		}
	}
}

// SetCSV makes Finish write the CSV to csv (nil: none): the header line
// (unless noHeader, for a shard's rows) and one row per combination of
// [Lo, Hi), in the order of Combos, each float64 in its shortest exact
// form.
func (w *Job) SetCSV(csv io.Writer, noHeader bool) { w.csv, w.noHeader = csv, noHeader }

// SetSaver hands each consumed batch's computed combinations to s (nil:
// none), after Restorer's restore and drop have run.
func (w *Job) SetSaver(s Saver) { w.saver = s }

// Computed is how many kernels the whole run convolves, those a resumed
// run restores included: combinations with the same kernel are computed
// once.
func (w *Job) Computed() int { return w.computed }

// Name is "wavelet".
func (w *Job) Name() string { return "wavelet" }

// ItemUnit names the items for the progress bar.
func (w *Job) ItemUnit() string { return "combinations" }

// Dtype is float64: the parameters and statistics.
func (w *Job) Dtype() tensor.Dtype { return tensor.Float64 }

// Items is the number of combinations.
func (w *Job) Items() int { return len(w.order) }

// MaxBatch is 8 kernels per replay.
func (w *Job) MaxBatch() int { return 8 }

// Build is combinations (batch, ops.WaveletParams) → WaveletResponse (on
// the device: the convolutions, each response reduced to its sums) →
// response (batch, ops.WaveletSums) → WaveletMoments (on the host) → stats
// (batch, 4): energy, std, max, kernel energy.
//
// The kernel's sampling and transform stay inside the response op: as a
// node of their own they would hold a transform-sized array per kernel of
// the batch, and on a GPU the kernel is sampled on the device in the same
// stream as its convolution.
func (w *Job) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	p := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, ops.WaveletParams), G.WithName("combinations"))
	resp, err := ops.OnDevice(ops.NewWaveletResponse(w.cfg.Src, batch), w.dev)
	if err != nil {
		return nil, nil, fmt.Errorf("wavelet: %w", err)
	}
	sums, err := G.ApplyOpWithName(resp, "response", p)
	if err != nil {
		return nil, nil, fmt.Errorf("wavelet: build graph: %w", err)
	}
	mom := ops.NewWaveletMoments(w.cfg.Src.N, batch)
	mom.Extra = w.extra()
	s, err := G.ApplyOpWithName(mom, "stats", sums)
	if err != nil {
		return nil, nil, fmt.Errorf("wavelet: build graph: %w", err)
	}
	return []*G.Node{p}, []*G.Node{s}, nil
}

// Feed writes the combinations run in places [off, off+n).
func (w *Job) Feed(in []*tensor.Dense, off, n int) error {
	d := in[0].Data().([]float64)
	for r := range n {
		i := w.order[off+r]
		c, p := w.cfg.Combos[i], w.pad[i]
		row := d[ops.WaveletParams*r : ops.WaveletParams*(r+1)]
		row[0], row[1], row[2] = c.Theta, c.Phi, c.Xi
		row[3], row[4], row[5] = float64(p[0]), float64(p[1]), float64(p[2])
	}
	return nil
}

// Consume records the batch's statistics in Combos order.
func (w *Job) Consume(out []*tensor.Dense, off, n int) error {
	s := out[0].Data().([]float64)
	k := w.extra()
	wd := 4 + k
	for r := range n {
		i := w.order[off+r]
		w.Stats[i] = [4]float64{s[wd*r], s[wd*r+1], s[wd*r+2], s[wd*r+3]}
		if k > 0 {
			copy(w.Extra[i], s[wd*r+4:wd*(r+1)])
		}
		if w.cfg.Src.Formulas != nil {
			w.nonFinite += w.countNonFinite(s[wd*r : wd*(r+1)])
		}
		for _, j := range w.same[i] {
			w.Stats[j] = w.Stats[i]
			if k > 0 {
				copy(w.Extra[j], w.Extra[i])
			}
		}
	}
	if w.cfg.FailOnNonFinite && w.nonFinite > 0 {
		return option.ErrNonFinite("--kernel or --stat", w.nonFinite)
	}
	return w.save(off, n)
}

// Cost is what the combinations run in places [off, off+n) cost, in
// units of one element of a transform: a combination costs its transform's
// L·log₂L, twice that for a sampled kernel (its own forward transform).
// The progress bar's time left and the report's drift go by it: a sweep
// runs its small transforms first.
func (w *Job) Cost(off, n int) float64 {
	var c float64
	sampled := KernelOf(w.cfg.Src) != nil
	for _, i := range w.order[off : off+n] {
		var l float64 = 1
		for k := range 3 {
			m := w.cfg.Src.N[k]
			if w.cfg.Src.Boundary == ops.Reflect {
				m = ops.FFTSize(m + 2*w.pad[i][k])
			}
			l *= float64(m)
		}
		x := l * math.Log2(max(l, 2))
		if sampled {
			x *= 2
		}
		c += x
	}
	return c
}

// RecordBytes is the size of a Saver's record: a computed combination's
// statistics (the Saver names its combination).
func (w *Job) RecordBytes() int { return 8 * (4 + w.extra()) }

// save hands the combinations run in places [off, off+n) to the Saver.
func (w *Job) save(off, n int) error {
	if w.saver == nil {
		return nil
	}
	recs := make([][]byte, n)
	for r := range recs {
		recs[r] = w.record(w.order[off+r])
	}
	return w.saver.AppendItems(w.order[off:off+n], recs)
}

// record is combination i's statistics as a Saver's record.
func (w *Job) record(i int) []byte {
	b := make([]byte, 0, w.RecordBytes())
	for _, v := range append(w.Stats[i][:], w.extraOf(i)...) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// memoKey names what combination i's statistics depend on beyond the
// volume and the options (its kernel and padding), for a Program that
// keeps them between calls; "" where a formula reads more (sharesKernels).
func (w *Job) memoKey(i int) string {
	return memoKey(w.cfg.Src.Formulas, w.cfg.Combos[i], w.pad[i])
}

// memoKey is Job.memoKey for combination c with padding pad under the
// formulas f.
func memoKey(f *ops.WaveletFormulas, c Combo, pad [3]int) string {
	if !sharesKernels(f) {
		return ""
	}
	return fmt.Sprintf("%s|%v", kernelKey(c), pad)
}

// extraOf is combination i's values of the user's statistics.
func (w *Job) extraOf(i int) []float64 {
	if w.Extra == nil {
		return nil
	}
	return w.Extra[i]
}

// Restorer returns restore, which takes the combination of a Saver's
// record (from an earlier run) as computed: its statistics, and those of the combinations
// sharing its kernel, are set; and drop, which takes the combinations
// restored out of the order still to run.
func (w *Job) Restorer() (restore func(int, []byte) error, drop func()) {
	todo := map[int]bool{}
	for _, i := range w.order {
		todo[i] = true
	}
	done := map[int]bool{}
	k := w.extra()
	vals := make([]float64, 4+k)
	restore = func(i int, b []byte) error {
		if !todo[i] || done[i] {
			return fmt.Errorf("combination %d is not one whose kernel this run computes: remove the checkpoint to start over", i)
		}
		for j := range vals {
			vals[j] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*j:]))
		}
		w.Stats[i] = [4]float64(vals[:4])
		if k > 0 {
			copy(w.Extra[i], vals[4:])
		}
		if w.cfg.Src.Formulas != nil {
			w.nonFinite += w.countNonFinite(vals)
		}
		for _, j := range w.same[i] {
			w.Stats[j] = w.Stats[i]
			if k > 0 {
				copy(w.Extra[j], w.Extra[i])
			}
		}
		done[i] = true
		return nil
	}
	drop = func() { w.order = slices.DeleteFunc(w.order, func(i int) bool { return done[i] }) }
	return restore, drop
}

// extra is the number of the user's statistics.
func (w *Job) extra() int {
	if f := w.cfg.Src.Formulas; f != nil {
		return len(f.Stats)
	}
	return 0
}

// Finish writes the CSV (SetCSV), in Combos order.
func (w *Job) Finish() error {
	if w.csv == nil {
		return nil
	}
	names, place := w.columns()
	if !w.noHeader {
		if _, err := io.WriteString(w.csv, strings.Join(names, ",")+"\n"); err != nil {
			return err
		}
	}
	vals := make([]float64, len(names))
	for i := w.cfg.Lo; i < w.cfg.Hi; i++ {
		b := w.row[:0]
		w.values(vals, i, place)
		for i, v := range vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, '\n')
		w.row = b
		if _, err := w.csv.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// CSVBytes bounds the size of the CSV's rows (Finish, without the header
// line): atLeast counts θ, φ and ξ as they will be written and one
// character per statistic; likely counts a statistic as a float64 written
// in full (17 characters), as most are.
func (w *Job) CSVBytes() (atLeast, likely int64) {
	names, _ := w.columns()
	stats := int64(len(names) - 3)
	var b []byte
	for i := w.cfg.Lo; i < w.cfg.Hi; i++ {
		c := w.cfg.Combos[i]
		b = strconv.AppendFloat(b[:0], c.Theta, 'g', -1, 64)
		b = strconv.AppendFloat(b, c.Phi, 'g', -1, 64)
		b = strconv.AppendFloat(b, c.Xi, 'g', -1, 64)
		atLeast += int64(len(b)) + int64(len(names)) // the commas and the newline
	}
	rows := int64(w.cfg.Hi - w.cfg.Lo)
	return atLeast + rows*stats, atLeast + rows*stats*17
}

// values writes combination i's CSV row into vals (one per column):
// θ, φ, ξ, the built-in statistics written, then the user's, each in the
// column place gives it (columns).
func (w *Job) values(vals []float64, i int, place []int) {
	st, c := w.Stats[i], w.cfg.Combos[i]
	vals[0], vals[1], vals[2] = c.Theta, c.Phi, c.Xi
	at := 3
	for k, on := range w.cols {
		if on {
			vals[at] = st[k]
			at++
		}
	}
	for k, col := range place {
		vals[col] = w.Extra[i][k]
	}
}

// Header is the CSV's header line, without its newline.
func (w *Job) Header() string {
	names, _ := w.columns()
	return strings.Join(names, ",")
}

// columns names the CSV's columns and, per statistic of the user's, its
// column: θ, φ, ξ, the built-in columns written, then the user's
// statistics (Parse refuses a statistic named like any of the others).
func (w *Job) columns() (names []string, place []int) {
	names = append([]string{"theta", "phi", "xi"}, w.cols.Names()...)
	if f := w.cfg.Src.Formulas; f != nil {
		for _, st := range f.Stats {
			place = append(place, len(names))
			names = append(names, st.Name)
		}
	}
	return names, place
}

// Result is the result block of a wavelet report.
type Result struct {
	Combinations int `json:"combinations"`
	// Largest is the combination with the largest value in the energy
	// column; nil when that column is left out (or no row has a value).
	*Largest
	// Computed is how many kernels were convolved: combinations with the
	// same kernel are computed once.
	Computed int `json:"computed"`
	// NonFinite counts the NaN or infinite statistics of a run with
	// formulas.
	NonFinite int64 `json:"nonfinite,omitempty"`
	// NoKernel counts the combinations without a kernel (ξ = 0, say),
	// whose rows hold NaN, and NoKernelWhy says why for the first.
	NoKernel    int    `json:"no_kernel,omitempty"`
	NoKernelWhy string `json:"no_kernel_first,omitempty"`
	// ZeroKernel counts the combinations whose kernel is 0 at every sample
	// (Σ ψ² = 0: a --kernel formula that gives 0, or values too small for
	// the arithmetic), whose statistics are those of a response of zeros,
	// and ZeroKernelFirst names the first, as "θ = …, φ = …, ξ = …".
	ZeroKernel      int    `json:"zero_kernel,omitempty"`
	ZeroKernelFirst string `json:"zero_kernel_first,omitempty"`
	// Range is a shard's combinations [lo, hi) and the sweep's count.
	Range [3]int `json:"range,omitzero"`
	// Columns are the CSV's columns.
	Columns []string `json:"columns"`
	// Passes are what the response op ran per combination.
	Passes ops.WaveletPasses `json:"passes"`
}

// Largest is the combination with the largest energy.
type Largest struct {
	MaxEnergy float64 `json:"max_energy"`
	Theta     float64 `json:"theta_of_max_energy"`
	Phi       float64 `json:"phi_of_max_energy"`
	Xi        float64 `json:"xi_of_max_energy"`
}

// Result names the combination with the largest value in the energy
// column, the columns and the passes.
func (w *Job) Result() Result {
	r := Result{Combinations: w.cfg.Hi - w.cfg.Lo, Computed: w.computed, NonFinite: w.nonFinite, NoKernel: w.bad,
		Passes: w.Passes(w.dev != nil)}
	if w.badWhy != nil {
		r.NoKernelWhy = w.badWhy.Error()
	}
	if w.cfg.Hi-w.cfg.Lo < len(w.cfg.Combos) {
		r.Range = [3]int{w.cfg.Lo, w.cfg.Hi, len(w.cfg.Combos)}
	}
	for i := w.cfg.Lo; i < w.cfg.Hi; i++ {
		if w.Stats[i][3] == 0 { // Σ ψ², computed whatever the columns (NaN: no kernel)
			if r.ZeroKernel == 0 {
				c := w.cfg.Combos[i]
				r.ZeroKernelFirst = fmt.Sprintf("θ = %.4g, φ = %.4g, ξ = %.4g", c.Theta, c.Phi, c.Xi)
			}
			r.ZeroKernel++
		}
	}
	names, place := w.columns()
	r.Columns = names
	e := slices.Index(names, "energy")
	if e < 0 {
		return r
	}
	vals := make([]float64, len(names))
	for i := w.cfg.Lo; i < w.cfg.Hi; i++ {
		w.values(vals, i, place)
		if v := vals[e]; !math.IsNaN(v) && (r.Largest == nil || v > r.MaxEnergy) {
			c := w.cfg.Combos[i]
			r.Largest = &Largest{MaxEnergy: v, Theta: c.Theta, Phi: c.Phi, Xi: c.Xi}
		}
	}
	return r
}

// SetDevice places the response op of the next Compile on dev (nil: the
// CPU), over a source of its own: sources are not shared between
// concurrent ops.
func (w *Job) SetDevice(dev ops.Device) {
	w.dev = dev
	w.cfg.Src = w.cfg.Src.Clone()
}
