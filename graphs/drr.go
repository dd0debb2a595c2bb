package graphs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/ops"
)

// Pose is one radiograph's geometry, in mm: an X-ray source and a flat
// detector of Rows×Cols pixels of Pixel[0]×Pixel[1] centred at Center,
// its rows along U and its columns down V. The centre of pixel (r, c) is
// Center + (c − (Cols−1)/2)·du·û + (r − (Rows−1)/2)·dv·v̂.
type Pose struct {
	Source [3]float64 `json:"source"`
	Center [3]float64 `json:"center"`
	U      [3]float64 `json:"u"`
	V      [3]float64 `json:"v"`
	Rows   int        `json:"rows"`
	Cols   int        `json:"cols"`
	Pixel  [2]float64 `json:"pixel"`
}

// ErrGeometry is wrapped by every error about poses.
var ErrGeometry = errors.New("geometry")

// Validate checks the pose; i names it in the error.
func (p Pose) Validate(i int) error {
	for _, v := range [][]float64{p.Source[:], p.Center[:], p.U[:], p.V[:], p.Pixel[:]} {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: pose %d has a NaN or infinite coordinate", ErrGeometry, i)
			}
		}
	}
	nu, nv := norm3(p.U), norm3(p.V)
	switch {
	case p.Rows < 1 || p.Cols < 1:
		return fmt.Errorf("%w: pose %d has a %d×%d detector; rows and cols must be at least 1", ErrGeometry, i, p.Rows, p.Cols)
	case !(p.Pixel[0] > 0 && p.Pixel[1] > 0):
		return fmt.Errorf("%w: pose %d has pixel size %v; both must be positive", ErrGeometry, i, p.Pixel)
	case nu == 0 || nv == 0:
		return fmt.Errorf("%w: pose %d has a zero u or v vector", ErrGeometry, i)
	}
	cross := [3]float64{p.U[1]*p.V[2] - p.U[2]*p.V[1], p.U[2]*p.V[0] - p.U[0]*p.V[2], p.U[0]*p.V[1] - p.U[1]*p.V[0]}
	if norm3(cross) < 1e-9*nu*nv {
		return fmt.Errorf("%w: pose %d has parallel u and v vectors", ErrGeometry, i)
	}
	return nil
}

func norm3(v [3]float64) float64 { return math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]) }

// Encode writes the pose as the DRR op reads it (ops.PoseWidth values):
// source, centre of pixel (0, 0), step along a row, step down a column.
func (p Pose) Encode(dst []float64) {
	nu, nv := norm3(p.U), norm3(p.V)
	for a := range 3 {
		du := p.Pixel[0] * p.U[a] / nu
		dv := p.Pixel[1] * p.V[a] / nv
		dst[a] = p.Source[a]
		dst[3+a] = p.Center[a] - float64(p.Cols-1)/2*du - float64(p.Rows-1)/2*dv
		dst[6+a] = du
		dst[9+a] = dv
	}
}

// Orbit returns n poses evenly spaced over 360° about the z axis through
// c: pose k at α = 2πk/n has its source at c + sid·(cos α, sin α, 0), its
// detector centre at c − (sdd − sid)·(cos α, sin α, 0), u = (−sin α, cos α, 0)
// and v = (0, 0, −1).
func Orbit(n int, c [3]float64, sdd, sid float64, rows, cols int, pixel float64) ([]Pose, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: --orbit %d: need at least one pose", ErrGeometry, n)
	}
	if !(sid > 0) || !(sdd > sid) {
		return nil, fmt.Errorf("%w: need 0 < sid < sdd, got sid %g, sdd %g", ErrGeometry, sid, sdd)
	}
	poses := make([]Pose, n)
	for k := range poses {
		a := 2 * math.Pi * float64(k) / float64(n)
		ca, sa := math.Cos(a), math.Sin(a)
		poses[k] = Pose{
			Source: [3]float64{c[0] + sid*ca, c[1] + sid*sa, c[2]},
			Center: [3]float64{c[0] - (sdd-sid)*ca, c[1] - (sdd-sid)*sa, c[2]},
			U:      [3]float64{-sa, ca, 0},
			V:      [3]float64{0, 0, -1},
			Rows:   rows, Cols: cols, Pixel: [2]float64{pixel, pixel},
		}
		if err := poses[k].Validate(k); err != nil {
			return nil, err
		}
	}
	return poses, nil
}

// ReadGeometry reads {"poses": [Pose, …]} and validates every pose: each
// field present, vectors of exactly three numbers. All poses of one run
// share the detector size.
func ReadGeometry(r io.Reader) ([]Pose, error) {
	dec := json.NewDecoder(io.LimitReader(r, 256<<20))
	dec.DisallowUnknownFields()
	var doc struct {
		Poses []struct {
			Source, Center, U, V, Pixel []float64
			Rows, Cols                  *int
		} `json:"poses"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGeometry, err)
	}
	if len(doc.Poses) == 0 {
		return nil, fmt.Errorf("%w: no poses", ErrGeometry)
	}
	poses := make([]Pose, len(doc.Poses))
	for i, q := range doc.Poses {
		p := &poses[i]
		for _, f := range []struct {
			name string
			src  []float64
			dst  []float64
		}{{"source", q.Source, p.Source[:]}, {"center", q.Center, p.Center[:]}, {"u", q.U, p.U[:]}, {"v", q.V, p.V[:]}, {"pixel", q.Pixel, p.Pixel[:]}} {
			if len(f.src) != len(f.dst) {
				return nil, fmt.Errorf("%w: pose %d: %q must be %d numbers, got %d", ErrGeometry, i, f.name, len(f.dst), len(f.src))
			}
			copy(f.dst, f.src)
		}
		if q.Rows == nil || q.Cols == nil {
			return nil, fmt.Errorf("%w: pose %d lacks rows or cols", ErrGeometry, i)
		}
		p.Rows, p.Cols = *q.Rows, *q.Cols
		if err := p.Validate(i); err != nil {
			return nil, err
		}
		if p.Rows != poses[0].Rows || p.Cols != poses[0].Cols {
			return nil, fmt.Errorf("%w: pose %d has a %d×%d detector, pose 0 %d×%d; one run renders one detector size",
				ErrGeometry, i, p.Rows, p.Cols, poses[0].Rows, poses[0].Cols)
		}
	}
	return poses, nil
}

// DRRConfig describes a DRR run.
type DRRConfig struct {
	Vol   *cpukern.Volume
	Poses []Pose
	Step  float64     // ≤ 0: Siddon's exact path; > 0: trilinear samples Step mm apart on a pose's longest ray (ops.DRR)
	Out   *npy.Writer // optional: (P, Rows, Cols) float32, in pose order
	// Image, when set, receives each pose's image (Rows×Cols, row-major)
	// as it is rendered.
	Image func(pose int, img []float32) error
	// Device runs the op on a GPU (nil: the CPU).
	Device ops.Device
}

// DRR is the DRR workload (seed 000) as a Job: each batch is a set of poses
// rendered by one replay of the compiled graph.
type DRR struct {
	cfg      DRRConfig
	Sum      float64 // Σ of every line integral
	Max      float64
	nonzero  int
	rows, cs int
}

// NewDRR checks cfg and returns the Job.
func NewDRR(cfg DRRConfig) (*DRR, error) {
	if cfg.Vol == nil || len(cfg.Vol.V) == 0 {
		return nil, errors.New("drr: config needs a volume")
	}
	if len(cfg.Poses) == 0 {
		return nil, fmt.Errorf("%w: no poses", ErrGeometry)
	}
	for i, p := range cfg.Poses {
		if err := p.Validate(i); err != nil {
			return nil, err
		}
		if p.Rows != cfg.Poses[0].Rows || p.Cols != cfg.Poses[0].Cols {
			return nil, fmt.Errorf("%w: pose %d's detector differs from pose 0's", ErrGeometry, i)
		}
	}
	return &DRR{cfg: cfg, rows: cfg.Poses[0].Rows, cs: cfg.Poses[0].Cols}, nil
}

// Name is "drr".
func (w *DRR) Name() string { return "drr" }

// Dtype is float32: the images.
func (w *DRR) Dtype() tensor.Dtype { return tensor.Float32 }

// Items is the number of poses.
func (w *DRR) Items() int { return len(w.cfg.Poses) }

// MaxBatch is 16 poses: enough rays to keep every core busy.
func (w *DRR) MaxBatch() int { return 16 }

// Build is poses (batch, 12) → DRR → (batch, rows, cols).
func (w *DRR) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	poses := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, ops.PoseWidth), G.WithName("poses"))
	op, err := ops.OnDevice(ops.NewDRR(w.cfg.Vol, w.rows, w.cs, w.cfg.Step, batch), w.cfg.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: %w", err)
	}
	img, err := G.ApplyOpWithName(op, "drr", poses)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: build graph: %w", err)
	}
	return []*G.Node{poses}, []*G.Node{img}, nil
}

// StagingBytes counts the output writer's buffers and a PNG's.
func (w *DRR) StagingBytes(int) int64 {
	var b int64
	if w.cfg.Out != nil {
		b += 1<<16 + 8192*8
	}
	if w.cfg.Image != nil {
		b += int64(w.rows*w.cs) * 2 * 2
	}
	return b
}

// Feed encodes poses [off, off+n).
func (w *DRR) Feed(in []*tensor.Dense, off, n int) error {
	d := in[0].Data().([]float64)
	for r := range n {
		w.cfg.Poses[off+r].Encode(d[r*ops.PoseWidth : (r+1)*ops.PoseWidth])
	}
	return nil
}

// Consume writes the batch's images.
func (w *DRR) Consume(out []*tensor.Dense, off, n int) error {
	imgs := out[0].Data().([]float32)
	per := w.rows * w.cs
	for r := range n {
		img := imgs[r*per : (r+1)*per]
		for _, v := range img {
			w.Sum += float64(v)
			if v != 0 {
				w.nonzero++
			}
			w.Max = max(w.Max, float64(v))
		}
		if w.cfg.Image != nil {
			if err := w.cfg.Image(off+r, img); err != nil {
				return err
			}
		}
	}
	if w.cfg.Out != nil {
		return w.cfg.Out.Write32(imgs[:n*per])
	}
	return nil
}

// AllMissed reports whether every ray of the run missed the volume.
func (w *DRR) AllMissed() bool { return w.nonzero == 0 }

// DRRResult is the result block of a DRR report.
type DRRResult struct {
	Poses  int     `json:"poses"`
	Rows   int     `json:"rows"`
	Cols   int     `json:"cols"`
	Method string  `json:"method"`
	Sum    float64 `json:"sum"`
	Max    float64 `json:"max"`
}

// Result summarises the run.
func (w *DRR) Result() DRRResult {
	m := "siddon"
	if w.cfg.Step > 0 {
		m = fmt.Sprintf("trilinear (step %g mm)", w.cfg.Step)
	}
	return DRRResult{Poses: len(w.cfg.Poses), Rows: w.rows, Cols: w.cs, Method: m, Sum: w.Sum, Max: w.Max}
}

// SetDevice places the op of the next Compile on dev (nil: the CPU).
func (w *DRR) SetDevice(dev ops.Device) { w.cfg.Device = dev }
