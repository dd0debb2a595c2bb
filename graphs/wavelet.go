package graphs

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

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

// WaveletConfig describes a wavelet sweep (seed 002).
type WaveletConfig struct {
	Src    *ops.WaveletSource
	Combos []Combo
	// CSV, when set, receives the header and one row per combination, in
	// the order of Combos, when the sweep finishes.
	CSV io.Writer
	// Device runs the op on a GPU (nil: the CPU).
	Device ops.Device
}

// Wavelet is the wavelet sweep as a Job: each batch is a set of kernels.
// In reflect mode the combinations run grouped by ξ, each group with the
// volume extended by the group's largest kernel half-widths (one transform
// of the volume per group), and the results are put back in order.
type Wavelet struct {
	cfg   WaveletConfig
	Stats [][4]float64 // energy, std, max, kernel energy, in Combos order
	order []int        // the order combinations run in
	pad   [][3]int     // per combination: its group's padding
	row   []byte
}

// WaveletPads returns, for every combination, the largest kernel
// half-widths among the combinations with the same ξ (the padding its
// group needs), and the largest over all.
func WaveletPads(a float64, combos []Combo) (pads [][3]int, largest [3]int) {
	group := map[float64][3]int{}
	for _, c := range combos {
		h := ops.HatSupport(a, c.Theta, c.Phi, c.Xi)
		g := group[c.Xi]
		for i := range 3 {
			g[i] = max(g[i], h[i])
			largest[i] = max(largest[i], h[i])
		}
		group[c.Xi] = g
	}
	pads = make([][3]int, len(combos))
	for i, c := range combos {
		pads[i] = group[c.Xi]
	}
	return pads, largest
}

// NewWavelet checks cfg and returns the Job; it writes the CSV header.
func NewWavelet(cfg WaveletConfig) (*Wavelet, error) {
	if cfg.Src == nil {
		return nil, errors.New("wavelet: config needs a volume")
	}
	if len(cfg.Combos) == 0 {
		return nil, fmt.Errorf("%w: no combinations", ops.ErrWavelet)
	}
	for _, c := range cfg.Combos {
		if err := ops.CheckHat(cfg.Src.A, c.Theta, c.Phi, c.Xi); err != nil {
			return nil, err
		}
	}
	w := &Wavelet{cfg: cfg, Stats: make([][4]float64, len(cfg.Combos)), order: make([]int, len(cfg.Combos))}
	w.pad, _ = WaveletPads(cfg.Src.A, cfg.Combos)
	for i := range w.order {
		w.order[i] = i
	}
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

// Dtype is float64: the parameters and statistics.
func (w *Wavelet) Dtype() tensor.Dtype { return tensor.Float64 }

// Items is the number of combinations.
func (w *Wavelet) Items() int { return len(w.cfg.Combos) }

// MaxBatch is 8 kernels per replay.
func (w *Wavelet) MaxBatch() int { return 8 }

// Build is params (batch, ops.WaveletParams) → WaveletStats → (batch, 4).
func (w *Wavelet) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	p := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, ops.WaveletParams), G.WithName("kernels"))
	op, err := ops.OnDevice(ops.NewWaveletStats(w.cfg.Src, batch), w.cfg.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("wavelet: %w", err)
	}
	s, err := G.ApplyOpWithName(op, "stats", p)
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
	for r := range n {
		w.Stats[w.order[off+r]] = [4]float64{s[4*r], s[4*r+1], s[4*r+2], s[4*r+3]}
	}
	return nil
}

// Finish writes the CSV, in Combos order.
func (w *Wavelet) Finish() error {
	if w.cfg.CSV == nil {
		return nil
	}
	if _, err := io.WriteString(w.cfg.CSV, "theta,phi,xi,energy,std,max,wavelet_energy\n"); err != nil {
		return err
	}
	for i, st := range w.Stats {
		c := w.cfg.Combos[i]
		b := w.row[:0]
		for i, v := range []float64{c.Theta, c.Phi, c.Xi, st[0], st[1], st[2], st[3]} {
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

// WaveletResult is the result block of a wavelet report.
type WaveletResult struct {
	Combinations int     `json:"combinations"`
	MaxEnergy    float64 `json:"max_energy"`
	Theta        float64 `json:"theta_of_max_energy"`
	Phi          float64 `json:"phi_of_max_energy"`
	Xi           float64 `json:"xi_of_max_energy"`
}

// Result names the combination with the largest response energy.
func (w *Wavelet) Result() WaveletResult {
	r := WaveletResult{Combinations: len(w.cfg.Combos)}
	for i, s := range w.Stats {
		if i == 0 || s[0] > r.MaxEnergy {
			c := w.cfg.Combos[i]
			r.MaxEnergy, r.Theta, r.Phi, r.Xi = s[0], c.Theta, c.Phi, c.Xi
		}
	}
	return r
}

// SetDevice places the op of the next Compile on dev (nil: the CPU), over
// a source of its own: sources are not shared between concurrent ops.
func (w *Wavelet) SetDevice(dev ops.Device) {
	w.cfg.Device = dev
	w.cfg.Src = w.cfg.Src.Clone()
}
