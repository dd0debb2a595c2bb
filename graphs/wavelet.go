package graphs

import (
	"errors"
	"fmt"
	"io"
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
	Vol    *ops.WaveletVolume
	Combos []Combo
	// CSV, when set, receives the header and one row per combination.
	CSV io.Writer
}

// Wavelet is the wavelet sweep as a Job: each batch is a set of kernels.
type Wavelet struct {
	cfg   WaveletConfig
	Stats [][4]float64 // energy, std, max, kernel energy per combination
	row   []byte
}

// NewWavelet checks cfg and returns the Job; it writes the CSV header.
func NewWavelet(cfg WaveletConfig) (*Wavelet, error) {
	if cfg.Vol == nil {
		return nil, errors.New("wavelet: config needs a volume")
	}
	if len(cfg.Combos) == 0 {
		return nil, fmt.Errorf("%w: no combinations", ops.ErrWavelet)
	}
	for _, c := range cfg.Combos {
		if err := ops.CheckHat(cfg.Vol.A, c.Theta, c.Phi, c.Xi); err != nil {
			return nil, err
		}
	}
	if cfg.CSV != nil {
		if _, err := io.WriteString(cfg.CSV, "theta,phi,xi,energy,std,max,wavelet_energy\n"); err != nil {
			return nil, err
		}
	}
	return &Wavelet{cfg: cfg, Stats: make([][4]float64, 0, len(cfg.Combos))}, nil
}

// Name is "wavelet".
func (w *Wavelet) Name() string { return "wavelet" }

// Dtype is float64: the parameters and statistics.
func (w *Wavelet) Dtype() tensor.Dtype { return tensor.Float64 }

// Items is the number of combinations.
func (w *Wavelet) Items() int { return len(w.cfg.Combos) }

// MaxBatch is 8 kernels per replay.
func (w *Wavelet) MaxBatch() int { return 8 }

// Build is params (batch, 3) → WaveletStats → (batch, 4).
func (w *Wavelet) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	p := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, 3), G.WithName("kernels"))
	s, err := G.ApplyOpWithName(ops.NewWaveletStats(w.cfg.Vol, batch), "stats", p)
	if err != nil {
		return nil, nil, fmt.Errorf("wavelet: build graph: %w", err)
	}
	return []*G.Node{p}, []*G.Node{s}, nil
}

// Feed writes combinations [off, off+n).
func (w *Wavelet) Feed(in []*tensor.Dense, off, n int) error {
	d := in[0].Data().([]float64)
	for r := range n {
		c := w.cfg.Combos[off+r]
		d[3*r], d[3*r+1], d[3*r+2] = c.Theta, c.Phi, c.Xi
	}
	return nil
}

// Consume records the batch's statistics and writes its CSV rows.
func (w *Wavelet) Consume(out []*tensor.Dense, off, n int) error {
	s := out[0].Data().([]float64)
	for r := range n {
		st := [4]float64{s[4*r], s[4*r+1], s[4*r+2], s[4*r+3]}
		w.Stats = append(w.Stats, st)
		if w.cfg.CSV == nil {
			continue
		}
		c := w.cfg.Combos[off+r]
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
