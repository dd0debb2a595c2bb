package graphs

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// DRRProgram is a DRR of one volume onto a Rows×Cols detector, compiled
// once: each Run renders any number of poses, block by block, replaying
// the same program over the same buffers.
type DRRProgram struct {
	ses        *engine.Session
	job        *DRR
	spec       DRRSpec
	Rows, Cols int
	// AllMissed says every ray of the last Run missed the volume.
	AllMissed bool
}

// PoseValues is the length of a pose as Run takes it: source (3), centre
// (3), u (3), v (3) and pixel size (2), as in a geometry file.
const PoseValues = 14

// CompileDRR validates s as the CLI does (its Volume, Geometry, Orbit,
// Out, PNG and shard settings are not used: the volume is v, copied, and
// the poses come with each Run), applies --hu or --mu to the copy, and
// compiles the DRR onto rows×cols pixels on dev (nil: the CPU) for blocks
// of its batch of poses (0: planned under its memory limit).
func CompileDRR(s DRRSpec, v *volume.Volume, rows, cols int, dev *engine.Device) (_ *DRRProgram, err error) {
	if dev, err = engine.InProcess(dev); err != nil {
		return nil, err
	}
	s.Volume, s.Geometry, s.Out, s.PNG, s.Shard, s.Shards, s.Resume = "(array)", "(array)", "", false, nil, nil, false
	s.Series, s.RawShape, s.RawDtype = "", "", ""
	p, err := s.parse()
	if err != nil {
		return nil, err
	}
	if rows < 1 || cols < 1 {
		return nil, fmt.Errorf("--detector %dx%d: want R, C ≥ 1", rows, cols)
	}
	if v == nil || int64(len(v.V)) != v.N[0]*v.N[1]*v.N[2] {
		return nil, fmt.Errorf("--volume: need an (X, Y, Z) array")
	}
	if need := 4 * int64(len(v.V)); need > dev.MemLimit { // the copy made here, before the plan
		return nil, &engine.BudgetError{Workload: "drr's volume", Need: need, Limit: dev.MemLimit}
	}
	c := *v
	c.V = append([]float32(nil), v.V...)
	if p.spacing != nil {
		c.Spacing = *p.spacing
	}
	if p.origin != nil {
		c.Origin = *p.origin
	}
	if err := volume.Check(&c); err != nil {
		return nil, fmt.Errorf("--volume: %w", err)
	}
	if s.HU {
		volume.ApplyHU(&c, s.MuWater)
	}
	cfg := DRRConfig{Vol: &c, FailOnNonFinite: s.FailOnNonFinite}
	if err := s.prepare(p, &cfg, rows, cols); err != nil {
		return nil, err
	}
	job := &DRR{cfg: cfg, rows: rows, cs: cols, noSum: true}
	ses, err := engine.NewSession(job, dev, true)
	if err != nil {
		return nil, err
	}
	return &DRRProgram{ses: ses, job: job, spec: s, Rows: rows, Cols: cols}, nil
}

// Poses reads n poses of PoseValues numbers each (a geometry file's
// source, center, u, v and pixel) onto the program's detector and
// validates them.
func (p *DRRProgram) Poses(x []float64) ([]ops.Pose, error) {
	if len(x) == 0 || len(x)%PoseValues != 0 {
		return nil, fmt.Errorf("%w: %d numbers: want %d per pose (source, center, u, v, pixel)", ops.ErrGeometry, len(x), PoseValues)
	}
	poses := make([]ops.Pose, len(x)/PoseValues)
	for i := range poses {
		q := &poses[i]
		r := x[i*PoseValues:]
		copy(q.Source[:], r[0:3])
		copy(q.Center[:], r[3:6])
		copy(q.U[:], r[6:9])
		copy(q.V[:], r[9:12])
		copy(q.Pixel[:], r[12:14])
		q.Rows, q.Cols = p.Rows, p.Cols
		if err := q.Validate(i); err != nil {
			return nil, err
		}
	}
	if len(poses) > ops.MaxPoses {
		return nil, fmt.Errorf("%w: %d poses; at most %d (2²⁰) in one call", ops.ErrGeometry, len(poses), ops.MaxPoses)
	}
	return poses, nil
}

// Orbit is the CLI's --orbit n about the volume's centre, in Run's
// layout (n·PoseValues numbers).
func (p *DRRProgram) Orbit(n int, sdd, sid, pixel float64) ([]float64, error) {
	poses, err := ops.Orbit(n, p.job.cfg.Vol.Centre(), sdd, sid, p.Rows, p.Cols, pixel)
	if err != nil {
		return nil, err
	}
	x := make([]float64, 0, n*PoseValues)
	for _, q := range poses {
		x = append(x, q.Source[:]...)
		x = append(x, q.Center[:]...)
		x = append(x, q.U[:]...)
		x = append(x, q.V[:]...)
		x = append(x, q.Pixel[:]...)
	}
	return x, nil
}

// Run renders the poses x (PoseValues numbers each) into dst, (P, Rows,
// Cols) float32: the line integrals, or --post of them. Neither is kept
// after Run returns.
func (p *DRRProgram) Run(x []float64, dst []float32) error {
	poses, err := p.Poses(x)
	if err != nil {
		return err
	}
	per := p.Rows * p.Cols
	if len(dst) != len(poses)*per {
		return fmt.Errorf("%w: out has %d values, want %d poses × %d×%d", engine.ErrBatch, len(dst), len(poses), p.Rows, p.Cols)
	}
	if p.job.cfg.Step > 0 {
		if err := checkSamples(p.job.cfg.Vol, poses, p.job.cfg.Step, p.spec.Step != nil); err != nil {
			return err
		}
	}
	j := p.job
	j.cfg.Poses = poses
	defer func() { j.cfg.Poses, j.cfg.Image = nil, nil }()
	j.Sum, j.Max, j.nonzero, j.done = 0, 0, 0, 0
	if f := j.cfg.Post; f != nil {
		f.ResetNonFinite()
	}
	j.cfg.Image = func(i int, img []float32, _, _ float32) error {
		copy(dst[i*per:(i+1)*per], img)
		return nil
	}
	if err := p.ses.Run(j); err != nil {
		return err
	}
	p.AllMissed = j.AllMissed()
	return nil
}

// Dtype is the images' dtype, float32.
func (p *DRRProgram) Dtype() tensor.Dtype { return tensor.Float32 }

// Close releases the program.
func (p *DRRProgram) Close() error { return p.ses.Close() }

// Interrupt stops the call in progress (one made between calls stops the
// next).
func (p *DRRProgram) Interrupt() { p.ses.Interrupt() }

// Report says how the calls so far went.
func (p *DRRProgram) Report() engine.Report { return p.ses.Report() }

// DOT is the compiled graph as Graphviz DOT.
func (p *DRRProgram) DOT() (string, error) { return p.ses.DOT() }
