package graphs

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"go/token"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/graphs/option"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// Combo is one kernel of a wavelet sweep.
type Combo struct{ Theta, Phi, Xi float64 }

// Combos lists the sweep θ outermost, then φ, then ξ.
func Combos(theta, phi, xi []float64) []Combo {
	var c []Combo
	for _, t := range theta {
		for _, p := range phi {
			for _, x := range xi {
				c = append(c, Combo{t, p, x})
			}
		}
	}
	return c
}

// checkCombos checks every combination's kernel of scale a (ops.CheckHat)
// and names the first that is not one.
func checkCombos(a float64, combos []Combo) error {
	for _, k := range combos {
		if err := ops.CheckHat(a, k.Theta, k.Phi, k.Xi); err != nil {
			return fmt.Errorf("θ = %g, φ = %g, ξ = %g: %w", k.Theta, k.Phi, k.Xi, err)
		}
	}
	return nil
}

// WaveletConfig describes a wavelet sweep.
type WaveletConfig struct {
	Src    *ops.WaveletSource
	Combos []Combo
	// CSV, when set, receives the header and one row per combination, in
	// the order of Combos, when the sweep finishes.
	CSV io.Writer
	// Device runs the response op on a GPU (nil: the CPU).
	Device ops.Device
	// FailOnNonFinite makes a NaN or infinite statistic of a run with
	// formulas an error.
	FailOnNonFinite bool
	// Lo and Hi restrict the run to the combinations [Lo, Hi) of Combos
	// (a shard; Hi = 0: all of them). Every combination gets the numbers
	// the whole sweep gives it: its padding and the combination whose
	// kernel it shares are found over all of Combos.
	Lo, Hi int
	// NoHeader leaves the header line out of CSV (a shard's rows).
	NoHeader bool
}

// Wavelet is the wavelet sweep as a Job: each batch is a set of kernels.
// In reflect mode each combination runs on the volume extended by what its
// own kernel needs (WaveletPads), the combinations grouped by extension
// (one transform of the volume per group), and the results are put back in
// order.
type Wavelet struct {
	cfg   WaveletConfig
	Stats [][4]float64 // energy, std, max, kernel energy, in Combos order
	// Extra holds the values of the user's statistics, in Combos order
	// (nil without any).
	Extra [][]float64
	order []int    // the order combinations run in
	pad   [][3]int // per combination: its padding in reflect mode
	same  [][]int  // per computed combination, the others with its kernel
	// nonFinite counts NaN or infinite statistics of a run with formulas.
	nonFinite int64
	row       []byte
	computed  int              // kernels the whole run convolves, resumed or not
	ckpt      *checkpoint.File // nil: no checkpoint
}

// WaveletPads returns, for every combination, the padding it runs with
// in reflect mode for a volume of n, and the largest over all. A kernel of
// half-widths h needs a transform of at least n + 2h along each axis,
// rounded up to the next size the FFT handles fastest; its padding is all
// that size leaves, (size − n)/2. Combinations that share a transform size
// share one transform of the volume, so a size needed by few combinations is
// merged into a larger one where the extra cost of the larger transforms is
// less than the volume's transform it saves (reflectGroups).
func WaveletPads(n [3]int, a float64, combos []Combo) (pads [][3]int, largest [3]int) {
	dims := make([][3]int, len(combos))
	for i, c := range combos {
		h := ops.HatSupport(a, c.Theta, c.Phi, c.Xi)
		for k := range 3 {
			dims[i][k] = ops.FFTSize(n[k] + 2*h[k])
		}
	}
	dims = reflectGroups(dims)
	pads = make([][3]int, len(combos))
	for i, d := range dims {
		for k := range 3 {
			pads[i][k] = (d[k] - n[k]) / 2
			largest[k] = max(largest[k], pads[i][k])
		}
	}
	return pads, largest
}

// volumeCost is what transforming the extended volume costs in units of
// one combination on a transform of the same size: a forward transform and
// the extension, against a product of spectra and an inverse transform.
const volumeCost = 2

// reflectGroups maps each combination's transform size to the one it runs
// with: sizes needed by few combinations are merged, smallest groups first,
// each into the group (or the elementwise larger size of the two) where the
// merge saves most, counting a combination's cost as its transform's
// volume and a group's as volumeCost more.
func reflectGroups(need [][3]int) [][3]int {
	type group struct {
		dims [3]int
		n    int
		into int // the group it was merged into, or -1
	}
	index := map[[3]int]int{}
	var gs []*group
	for _, d := range need {
		if _, ok := index[d]; !ok {
			index[d] = len(gs)
			gs = append(gs, &group{dims: d, into: -1})
		}
		gs[index[d]].n++
	}
	vol := func(d [3]int) float64 { return float64(d[0]) * float64(d[1]) * float64(d[2]) }
	cost := func(d [3]int, n int) float64 { return (float64(n) + volumeCost) * vol(d) }
	order := make([]int, len(gs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return gs[order[a]].n < gs[order[b]].n })
	for _, a := range order {
		ga := gs[a]
		best, save := -1, 0.0
		for b, gb := range gs {
			if b == a || gb.into >= 0 {
				continue
			}
			var m [3]int
			for k := range 3 {
				m[k] = max(ga.dims[k], gb.dims[k])
			}
			if d := cost(ga.dims, ga.n) + cost(gb.dims, gb.n) - cost(m, ga.n+gb.n); d > save {
				best, save = b, d
			}
		}
		if best >= 0 {
			gb := gs[best]
			for k := range 3 {
				gb.dims[k] = max(gb.dims[k], ga.dims[k])
			}
			gb.n += ga.n
			ga.into = best
		}
	}
	out := make([][3]int, len(need))
	for i, d := range need {
		g := index[d]
		for gs[g].into >= 0 {
			g = gs[g].into
		}
		out[i] = gs[g].dims
	}
	return out
}

// kernelKey names the hat of c up to what does not change it: "" never
// matches. With ξ = 1 the hat is round (the same for every θ and φ);
// otherwise it depends on ξ and on its stretched axis n up to sign (ψ is
// symmetric about n and ψ(r) = ψ(−r)), the first row of the rotation.
func kernelKey(c Combo) string {
	if c.Xi == 1 {
		return "round"
	}
	ct, st, cp, sp := math.Cos(c.Theta), math.Sin(c.Theta), math.Cos(c.Phi), math.Sin(c.Phi)
	n := [3]float64{cp * ct, -st, sp * ct}
	for _, v := range n { // the sign: the first clearly nonzero component positive
		if math.Abs(v) > 1e-9 {
			if v < 0 {
				n[0], n[1], n[2] = -n[0], -n[1], -n[2]
			}
			break
		}
	}
	r := func(v float64) float64 { return math.Round(v*1e12) / 1e12 }
	return fmt.Sprintf("%v|%v,%v,%v", c.Xi, r(n[0]), r(n[1]), r(n[2]))
}

// NewWavelet checks cfg and returns the Job.
func NewWavelet(cfg WaveletConfig) (*Wavelet, error) {
	if cfg.Src == nil {
		return nil, errors.New("wavelet: config needs a volume")
	}
	if len(cfg.Combos) == 0 {
		return nil, fmt.Errorf("%w: no combinations", ops.ErrWavelet)
	}
	if err := checkCombos(cfg.Src.A, cfg.Combos); err != nil {
		return nil, err
	}
	if cfg.Hi == 0 {
		cfg.Lo, cfg.Hi = 0, len(cfg.Combos)
	}
	if cfg.Lo < 0 || cfg.Hi > len(cfg.Combos) || cfg.Lo >= cfg.Hi {
		return nil, fmt.Errorf("%w: combinations [%d, %d) of %d", ops.ErrWavelet, cfg.Lo, cfg.Hi, len(cfg.Combos))
	}
	w := &Wavelet{cfg: cfg, Stats: make([][4]float64, len(cfg.Combos)), order: make([]int, len(cfg.Combos))}
	if k := w.extra(); k > 0 {
		w.Extra = make([][]float64, len(cfg.Combos))
		for i := range w.Extra {
			w.Extra[i] = make([]float64, k)
		}
	}
	w.pad, _ = WaveletPads(cfg.Src.N, cfg.Src.A, cfg.Combos)
	// Combinations whose kernels are the same (the hat with ξ = 1 is
	// round: every θ and φ; otherwise its stretched axis n and −n) are
	// computed once, the first of each in Combos order (which may come
	// before Lo); the others of [Lo, Hi) take its statistics.
	w.order = w.order[:0]
	w.same = make([][]int, len(cfg.Combos))
	first := map[string]int{}
	computed := make([]bool, len(cfg.Combos))
	for i, c := range cfg.Combos[:cfg.Hi] {
		key := kernelKey(c)
		if cfg.Src.Formulas != nil && cfg.Src.Formulas.Kernel != nil {
			key = "" // a formula may read θ, φ or the offsets themselves
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

// Name is "wavelet".
func (w *Wavelet) Name() string { return "wavelet" }

// ItemUnit names the items for the progress bar.
func (w *Wavelet) ItemUnit() string { return "combinations" }

// Dtype is float64: the parameters and statistics.
func (w *Wavelet) Dtype() tensor.Dtype { return tensor.Float64 }

// Items is the number of combinations.
func (w *Wavelet) Items() int { return len(w.order) }

// MaxBatch is 8 kernels per replay.
func (w *Wavelet) MaxBatch() int { return 8 }

// Build is combinations (batch, ops.WaveletParams) → WaveletResponse (on
// the device: the convolutions, each response reduced to its sums) →
// response (batch, ops.WaveletSums) → WaveletMoments (on the host) → stats
// (batch, 4): energy, std, max, kernel energy.
//
// The kernel's sampling and transform stay inside the response op: as a
// node of their own they would hold a transform-sized array per kernel of
// the batch, and on a GPU the kernel is sampled on the device in the same
// stream as its convolution.
func (w *Wavelet) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	p := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, ops.WaveletParams), G.WithName("combinations"))
	resp, err := ops.OnDevice(ops.NewWaveletResponse(w.cfg.Src, batch), w.cfg.Device)
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
func (w *Wavelet) Feed(in []*tensor.Dense, off, n int) error {
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
func (w *Wavelet) Consume(out []*tensor.Dense, off, n int) error {
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
			w.nonFinite += option.CountNonFinite(s[wd*r : wd*(r+1)])
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

// recordBytes is the size of a checkpoint record: a computed combination's
// statistics (the record names its combination).
func (w *Wavelet) recordBytes() int { return 8 * (4 + w.extra()) }

// save appends the combinations run in places [off, off+n) to the
// checkpoint.
func (w *Wavelet) save(off, n int) error {
	if w.ckpt == nil {
		return nil
	}
	recs := make([][]byte, n)
	for r := range recs {
		i := w.order[off+r]
		b := make([]byte, 0, w.recordBytes())
		for _, v := range append(w.Stats[i][:], w.extraOf(i)...) {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		recs[r] = b
	}
	return w.ckpt.AppendItems(w.order[off:off+n], recs)
}

// extraOf is combination i's values of the user's statistics.
func (w *Wavelet) extraOf(i int) []float64 {
	if w.Extra == nil {
		return nil
	}
	return w.Extra[i]
}

// restorer returns restore, which takes the combination of a checkpoint's
// record as computed: its statistics, and those of the combinations
// sharing its kernel, are set; and drop, which takes the combinations
// restored out of the order still to run.
func (w *Wavelet) restorer() (restore func(int, []byte) error, drop func()) {
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
			w.nonFinite += option.CountNonFinite(vals)
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
func (w *Wavelet) extra() int {
	if f := w.cfg.Src.Formulas; f != nil {
		return len(f.Stats)
	}
	return 0
}

// Finish writes the CSV, in Combos order.
func (w *Wavelet) Finish() error {
	if w.cfg.CSV == nil {
		return nil
	}
	names, place := w.columns()
	if !w.cfg.NoHeader {
		if _, err := io.WriteString(w.cfg.CSV, strings.Join(names, ",")+"\n"); err != nil {
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
		if _, err := w.cfg.CSV.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// values writes combination i's CSV row into vals (one per column):
// θ, φ, ξ, the built-in statistics, then the user's, each in the column
// place gives it (columns).
func (w *Wavelet) values(vals []float64, i int, place []int) {
	st, c := w.Stats[i], w.cfg.Combos[i]
	copy(vals, []float64{c.Theta, c.Phi, c.Xi, st[0], st[1], st[2], st[3]})
	for k, col := range place {
		vals[col] = w.Extra[i][k]
	}
}

// Header is the CSV's header line, without its newline.
func (w *Wavelet) Header() string {
	names, _ := w.columns()
	return strings.Join(names, ",")
}

// columns names the CSV's columns and, per statistic of the user's, its
// column: the built-in columns, a statistic named like one in its place,
// the others after them.
func (w *Wavelet) columns() (names []string, place []int) {
	names = []string{"theta", "phi", "xi", "energy", "std", "max", "wavelet_energy"}
	at := map[string]int{}
	for i, n := range names {
		at[n] = i
	}
	if f := w.cfg.Src.Formulas; f != nil {
		for _, st := range f.Stats {
			i, ok := at[st.Name]
			if !ok {
				i = len(names)
				names = append(names, st.Name)
			}
			place = append(place, i)
		}
	}
	return names, place
}

// WaveletResult is the result block of a wavelet report.
type WaveletResult struct {
	Combinations int     `json:"combinations"`
	MaxEnergy    float64 `json:"max_energy"`
	Theta        float64 `json:"theta_of_max_energy"`
	Phi          float64 `json:"phi_of_max_energy"`
	Xi           float64 `json:"xi_of_max_energy"`
	// Computed is how many kernels were convolved: combinations with the
	// same kernel are computed once.
	Computed int `json:"computed"`
	// NonFinite counts the NaN or infinite statistics of a run with
	// formulas.
	NonFinite int64 `json:"nonfinite,omitempty"`
	// Range is a shard's combinations [lo, hi) and the sweep's count.
	Range [3]int `json:"range,omitzero"`
}

// Result names the combination with the largest response energy.
func (w *Wavelet) Result() WaveletResult {
	r := WaveletResult{Combinations: w.cfg.Hi - w.cfg.Lo, Computed: w.computed, NonFinite: w.nonFinite}
	if w.cfg.Hi-w.cfg.Lo < len(w.cfg.Combos) {
		r.Range = [3]int{w.cfg.Lo, w.cfg.Hi, len(w.cfg.Combos)}
	}
	for i := w.cfg.Lo; i < w.cfg.Hi; i++ {
		if s := w.Stats[i]; i == w.cfg.Lo || s[0] > r.MaxEnergy {
			c := w.cfg.Combos[i]
			r.MaxEnergy, r.Theta, r.Phi, r.Xi = s[0], c.Theta, c.Phi, c.Xi
		}
	}
	return r
}

// SetDevice places the response op of the next Compile on dev (nil: the
// CPU), over a source of its own: sources are not shared between
// concurrent ops.
func (w *Wavelet) SetDevice(dev ops.Device) {
	w.cfg.Device = dev
	w.cfg.Src = w.cfg.Src.Clone()
}

// WaveletSpec is a wavelet sweep as the user states it: a volume file or
// the size and seed of a random one, the (θ, φ, ξ) grid as lists or
// ranges, the kernel scale, the boundary and where the CSV goes.
// DefaultWaveletSpec holds the defaults.
type WaveletSpec struct {
	// Volume is a .npy, .nii, .nii.gz, .mha or .mhd file; "": a volume of
	// standard normal values of Size from Seed.
	Volume string
	Size   string // "XxYxZ", each at least 1; without Volume
	Seed   uint64
	// Theta, Phi and Xi are the values of θ, φ and ξ, each a
	// comma-separated list or START:STOP:COUNT (COUNT values from START,
	// STOP excluded); numbers may use pi (pi/4, 3*pi/2, -pi).
	Theta, Phi, Xi string
	A              float64 // the kernel scale, in voxels
	// Boundary is "reflect" (the default when empty) or "wrap".
	Boundary string
	// Kernel is the user's kernel formula over the offset x, y, z from its
	// centre, the offset u, v, w in the kernel's frame and theta, phi, xi,
	// a, sampled over the Mexican hat's support box; "": the hat,
	// (3 - q)*exp(-q/2) with q = (v/a)^2 + (u/(a*xi))^2 + (w/a)^2.
	Kernel string
	// Stats are the user's statistics of each response g, each
	// "name=formula" reducing to one number, e.g. "l1=sum(abs(g))": extra
	// CSV columns after the built-in ones.
	Stats  []string
	Params map[string]float64
	// FailOnNonFinite makes a NaN or infinite value of a formula an error.
	FailOnNonFinite bool
	// Out is the file the CSV goes to; "": to Stdout. A shard goes to an
	// .npz Out.
	Out    string
	Stdout io.Writer // nil: the CSV goes nowhere without Out
	// Shard computes only shard "i/n" of the combinations (0 ≤ i < n, a
	// contiguous range in CSV order) into an .npz Out, for `tapeloop
	// merge`; Shards splits into this many shards, this job's index read
	// from Env (nil: the process's environment: SLURM_ARRAY_TASK_ID or
	// JOB_COMPLETION_INDEX). Give one or neither.
	Shard  *string
	Shards *int
	Env    func(string) (string, bool)
	Warn   io.Writer // the volume reader's warnings; nil: discarded
	// Resume continues the run whose checkpoint is beside Out (see
	// openCheckpoint); without it, a checkpoint there is refused.
	Resume bool
}

// DefaultWaveletSpec is the built-in sweep: a random 32³ volume, θ over
// four and φ over two steps of [0, π), ξ ∈ {1, 2}, a = 1, reflect.
func DefaultWaveletSpec() WaveletSpec {
	return WaveletSpec{Size: "32x32x32", Seed: 1, A: 1, Theta: "0:pi:4", Phi: "0:pi:2", Xi: "1,2", Boundary: "reflect"}
}

// waveletPlan is a WaveletSpec checked and parsed.
type waveletPlan struct {
	kernel    *formula.Formula
	stats     []*formula.Formula
	statNames []string
	boundary  ops.Boundary
	combos    []Combo
	size      [3]int // without a volume file
	shard     shardChoice
}

func (s WaveletSpec) parse() (p waveletPlan, err error) {
	if p.boundary, err = ops.ParseBoundary(option.OrDefault(s.Boundary, "reflect")); err != nil {
		return p, fmt.Errorf("--boundary: %w", err)
	}
	var lists [3][]float64
	for i, f := range []struct{ name, value string }{{"theta", s.Theta}, {"phi", s.Phi}, {"xi", s.Xi}} {
		if lists[i], err = parseList(f.name, f.value); err != nil {
			return p, err
		}
	}
	if n := sysmem.Mul(int64(len(lists[0])), int64(len(lists[1])), int64(len(lists[2]))); n < 0 || n > maxCount {
		return p, fmt.Errorf("--theta × --phi × --xi: %d × %d × %d combinations; at most %d (2²⁴) in one run: split the sweep into several",
			len(lists[0]), len(lists[1]), len(lists[2]), maxCount)
	}
	p.combos = Combos(lists[0], lists[1], lists[2])
	if err := checkCombos(s.A, p.combos); err != nil {
		return p, err
	}
	if s.Volume == "" {
		if p.size, err = parseSize(s.Size); err != nil {
			return p, err
		}
	}
	fl := []option.Formula{{Flag: "--kernel", Src: s.Kernel, Vars: ops.KernelVars, Pointwise: true}}
	// A statistic may take the name of a built-in column (energy=sum(g^2)):
	// its value then fills that column. Not a parameter's column, nor
	// twice the same name.
	seen := map[string]bool{"theta": true, "phi": true, "xi": true}
	for _, st := range s.Stats {
		name, src, ok := strings.Cut(st, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok || strings.TrimSpace(src) == "":
			return p, fmt.Errorf("--stat %q: want name=formula, e.g. l1=sum(abs(g))", st)
		case !token.IsIdentifier(name):
			return p, fmt.Errorf("--stat %q: the name %q is not a name (letters, digits, _)", st, name)
		case seen[name]:
			return p, fmt.Errorf("--stat %q: there is already a column %s", st, name)
		}
		seen[name] = true
		p.statNames = append(p.statNames, name)
		fl = append(fl, option.Formula{Flag: "--stat " + name, Src: src, Vars: ops.StatVars, Reduce: true})
	}
	fs, err := option.ParseFormulas(s.Params, fl...)
	if err != nil {
		return p, err
	}
	p.kernel, p.stats = fs[0], fs[1:]
	if p.kernel == nil && len(p.stats) == 0 && s.FailOnNonFinite {
		return p, errors.New("--fail-on-nonfinite: it is for --kernel or --stat, and neither is given")
	}
	if p.shard, err = parseShard(s.Shard, s.Shards, s.Env, s.Out); err != nil {
		return p, err
	}
	if s.Resume && s.Out == "" {
		return p, errors.New("--resume: it needs --out: a run to standard output keeps no checkpoint")
	}
	return p, nil
}

// Validate checks what can be checked before the volume is read.
func (s WaveletSpec) Validate() error {
	_, err := s.parse()
	return err
}

// parseSize parses a volume size "XxYxZ", each at least 1, 2²⁸ voxels at
// most.
func parseSize(s string) ([3]int, error) {
	var n [3]int
	if _, err := fmt.Sscanf(s, "%dx%dx%d", &n[0], &n[1], &n[2]); err != nil ||
		fmt.Sprintf("%dx%dx%d", n[0], n[1], n[2]) != s || n[0] < 1 || n[1] < 1 || n[2] < 1 {
		return n, fmt.Errorf("--size %q: want XxYxZ, each at least 1", s)
	}
	if v := sysmem.Mul(int64(n[0]), int64(n[1]), int64(n[2])); v < 0 || v > 1<<28 {
		return n, fmt.Errorf("--size %q: at most 2²⁸ voxels for the built-in volume", s)
	}
	return n, nil
}

// parseNumber parses a number that may use pi: 2.5, pi, -pi/4, 3pi/2, 0.5*pi.
func parseNumber(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	bad := fmt.Errorf("%q is not a number (e.g. 2.5, pi, pi/4, 3*pi/2)", s)
	num, den, hasDen := strings.Cut(t, "/")
	d := 1.0
	if hasDen {
		var err error
		if d, err = strconv.ParseFloat(strings.TrimSpace(den), 64); err != nil || d == 0 {
			return 0, bad
		}
	}
	num = strings.TrimSpace(num)
	v := 1.0
	if coef, ok := strings.CutSuffix(num, "pi"); ok {
		coef = strings.TrimSuffix(strings.TrimSpace(coef), "*")
		switch coef {
		case "", "+":
		case "-":
			v = -1
		default:
			c, err := strconv.ParseFloat(coef, 64)
			if err != nil {
				return 0, bad
			}
			v = c
		}
		v *= math.Pi
	} else {
		c, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, bad
		}
		v = c
	}
	v /= d
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, bad
	}
	return v, nil
}

// maxCount is the most values a list, and the most combinations a sweep,
// may have.
const maxCount = 1 << 24

// parseList parses "a,b,c" or "START:STOP:COUNT" (COUNT values
// START + k·(STOP − START)/COUNT, STOP excluded, like numpy.arange grids)
// for the flag --name.
func parseList(name, s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--%s: empty list", name)
	}
	if strings.Contains(s, ":") {
		f := strings.Split(s, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("--%s %q: want START:STOP:COUNT", name, s)
		}
		lo, err := parseNumber(f[0])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		hi, err := parseNumber(f[1])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(f[2]))
		if err != nil || n < 1 || n > maxCount {
			return nil, fmt.Errorf("--%s %q: COUNT %q must be an integer from 1 to %d (2²⁴)", name, s, f[2], maxCount)
		}
		out := make([]float64, n)
		for k := range out {
			out[k] = lo + float64(k)*(hi-lo)/float64(n)
		}
		return out, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := parseNumber(f)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// WaveletTask is an opened wavelet sweep.
type WaveletTask struct {
	job   *Wavelet
	claim *claim // the checkpoint's lock, and what it holds
	ckp   *checkpoint.File
	out   *atomicfile.File
	npz   *npy.NPZWriter // a shard's archive
	csv   *bufio.Writer
}

// OpenWavelet validates s, reads or makes the volume, and creates the
// output. With withOutput false (for printing the graph) no CSV is
// written.
func OpenWavelet(s WaveletSpec, dev *engine.Device, withOutput bool) (_ *WaveletTask, err error) {
	p, err := s.parse()
	if err != nil {
		return nil, err
	}
	if s.Volume != "" {
		if err := checkVolumeFits("wavelet", s.Volume, volume.Options{}, dev.MemLimit); err != nil {
			return nil, err
		}
	}
	lo, hi, err := p.shard.items(len(p.combos), "combinations", s.Out, withOutput)
	if err != nil {
		return nil, err
	}
	if s.Volume == "" {
		if err := checkVoxelsFit("wavelet's volume", [3]int64{int64(p.size[0]), int64(p.size[1]), int64(p.size[2])}, dev.MemLimit); err != nil {
			return nil, fmt.Errorf("--size %s: %w", s.Size, err)
		}
	}
	v, n, err := s.volume(p)
	if err != nil {
		return nil, err
	}
	// A shard pads for the whole sweep: the paddings depend on which
	// combinations run together (WaveletPads).
	_, pad := WaveletPads(n, s.A, p.combos)
	if err := checkWaveletPadding(n, pad, dev.MemLimit); err != nil {
		return nil, err
	}
	src, err := ops.NewWaveletSource(v, n, s.A, p.boundary, pad)
	if err != nil {
		return nil, err
	}
	src.MaxSupport = maxSupport(s.A, p.combos)
	if src.Formulas, err = p.formulas(n, dev.GPU()); err != nil {
		return nil, err
	}
	t := &WaveletTask{}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	cfg := WaveletConfig{Src: src, Combos: p.combos, FailOnNonFinite: s.FailOnNonFinite, Lo: lo, Hi: hi}
	if t.job, err = NewWavelet(cfg); err != nil {
		return nil, err
	}
	var fp string
	if withOutput && s.Out != "" {
		fp = s.fingerprint(p, v, n, t.job.Header(), dev)
		h := checkpoint.Header{Workload: shard.Wavelet, Fingerprint: fp, Lo: lo, Hi: hi, Record: t.job.recordBytes()}
		if t.claim, err = claimCheckpoint(s.Out, h, s.Resume, len(p.combos), false, "kernels", s.warn); err != nil {
			return nil, err
		}
		restore, drop := t.job.restorer()
		if t.ckp, err = t.claim.open(t.job.computed, restore); err != nil {
			return nil, err
		}
		drop()
		t.job.ckpt = t.ckp
	}
	if withOutput {
		switch {
		case p.shard.sharded:
			if t.out, err = atomicfile.Create(s.Out); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			t.npz = npy.NewNPZWriter(t.out)
			meta := shard.RangeMeta{Workload: shard.Wavelet, Items: len(p.combos), Lo: lo, Hi: hi,
				Index: p.shard.index, Count: p.shard.count, Header: t.job.Header(),
				Fingerprint: fp}
			if err = shard.WriteRangeMeta(t.npz, meta); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			rows, err := t.npz.CreateRaw("rows.csv")
			if err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			t.csv = bufio.NewWriter(rows)
			cfg.NoHeader = true
		case s.Out != "":
			if t.out, err = atomicfile.Create(s.Out); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			t.csv = bufio.NewWriter(t.out)
		case s.Stdout != nil:
			t.csv = bufio.NewWriter(s.Stdout)
		}
		if t.csv != nil {
			cfg.CSV = t.csv
		}
		t.job.cfg.CSV, t.job.cfg.NoHeader = cfg.CSV, cfg.NoHeader
	}
	return t, nil
}

// checkWaveletPadding refuses a sweep over a volume of n whose largest
// padding is pad when the volume extended by pad on every side, the least
// any transform of the sweep takes, does not fit limit by itself.
func checkWaveletPadding(n, pad [3]int, limit int64) error {
	padded := sysmem.Mul(int64(n[0]+2*pad[0]), int64(n[1]+2*pad[1]), int64(n[2]+2*pad[2]), 4)
	if padded < 0 || padded > limit {
		if padded < 0 {
			padded = math.MaxInt64
		}
		return &engine.BudgetError{Workload: "wavelet's padded volume", Need: padded, Limit: limit}
	}
	return nil
}

// maxSupport is the largest half-widths of the hats of scale a over
// combos, along each axis (WaveletSource.MaxSupport).
func maxSupport(a float64, combos []Combo) [3]int {
	var m [3]int
	for _, c := range combos {
		h := ops.HatSupport(a, c.Theta, c.Phi, c.Xi)
		for k := range 3 {
			m[k] = max(m[k], h[k])
		}
	}
	return m
}

// formulas compiles the plan's kernel and statistics for responses over
// a volume of n (nil: neither given); they run on the CPU only, so gpu
// refuses them.
func (p waveletPlan) formulas(n [3]int, gpu bool) (*ops.WaveletFormulas, error) {
	if p.kernel == nil && len(p.stats) == 0 {
		return nil, nil
	}
	if gpu {
		return nil, errors.New("--kernel and --stat: formulas in wavelet run on the CPU only; use --device cpu")
	}
	f := &ops.WaveletFormulas{}
	if p.kernel != nil {
		var err error
		if f.Kernel, err = ops.NewKernelFormula(p.kernel); err != nil {
			return nil, err
		}
	}
	for i, st := range p.stats {
		ws, err := ops.NewWaveletStat(p.statNames[i], st, n[0]*n[1]*n[2])
		if err != nil {
			return nil, err
		}
		f.Stats = append(f.Stats, ws)
	}
	return f, nil
}

// fingerprint identifies what a shard's statistics depend on: the volume's
// values as computed on, the whole sweep, the kernel scale, the boundary,
// the formulas with their parameters, the CSV's columns and the kind of
// device (a GPU rounds otherwise than the CPU).
func (s WaveletSpec) fingerprint(p waveletPlan, v []float32, n [3]int, header string, dev *engine.Device) string {
	f := newRunPrint(shard.Wavelet)
	f.ints(n[0], n[1], n[2])
	f.f32s(v)
	f.f64s(s.A)
	f.str(p.boundary.String())
	for _, c := range p.combos {
		f.f64s(c.Theta, c.Phi, c.Xi)
	}
	if p.kernel != nil {
		f.str(p.kernel.Canonical())
	}
	for i, st := range p.stats {
		f.str(p.statNames[i] + "=" + st.Canonical())
	}
	f.params(s.Params)
	f.str(header)
	f.str(dev.Kind())
	return f.sum()
}

// volume reads the volume file, float32 as the reader gives it, or makes
// the random volume: standard normals rounded to float32.
func (s WaveletSpec) volume(p waveletPlan) ([]float32, [3]int, error) {
	if s.Volume != "" {
		v, err := volume.Load(s.Volume, volume.Options{VoxelsOnly: true, Warn: s.Warn})
		if err != nil {
			return nil, [3]int{}, fmt.Errorf("--volume: %w", err)
		}
		return v.V, [3]int{int(v.N[0]), int(v.N[1]), int(v.N[2])}, nil
	}
	n := p.size
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed0002))
	x := make([]float32, n[0]*n[1]*n[2])
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x, n, nil
}

// Job is the sweep.
func (t *WaveletTask) Job() engine.Job { return t.job }

// Result is the run's WaveletResult.
func (t *WaveletTask) Result() any { return t.job.Result() }

// Summary is the run's WaveletResult.
func (t *WaveletTask) Summary() WaveletResult { return t.job.Result() }

// Commit flushes the CSV, closes a shard's archive and renames the
// output file into place.
func (t *WaveletTask) Commit() error {
	if t.csv != nil {
		if err := t.csv.Flush(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if t.npz != nil {
		if err := t.npz.Close(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if t.out != nil {
		if err := t.out.Commit(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		t.out = nil
	}
	err := removeCheckpoint(&t.ckp)
	t.claim.release()
	return err
}

// Close removes an uncommitted output file and closes the checkpoint,
// which stays when it holds finished work.
func (t *WaveletTask) Close() error {
	if t.out != nil {
		t.out.Abort()
		t.out = nil
	}
	err := closeCheckpoint(&t.ckp)
	t.claim.release()
	return err
}

// warn writes a warning line to s.Warn, if any.
func (s WaveletSpec) warn(msg string) {
	if s.Warn != nil {
		fmt.Fprintf(s.Warn, "tapeloop: warning: %s\n", msg)
	}
}

// Unfinished is err, the error that ended the run, saying what the
// checkpoint holds and how to continue.
func (t *WaveletTask) Unfinished(err error) error { return unfinished(t.job.Name(), err, t.ckp) }
