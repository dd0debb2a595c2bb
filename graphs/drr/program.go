package drr

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// Program is a DRR of one volume onto a Rows×Cols detector, compiled
// once: each Run renders any number of poses, block by block, replaying
// the same program over the same buffers.
type Program struct {
	ses        *engine.Session
	job        *Job
	stepGiven  bool // the trilinear step is the Config's, not the default
	Rows, Cols int
	// AllMissed says every ray of the last Run missed the volume.
	AllMissed bool
	// Warnings are the last Run's faults of the geometry (Job.Warnings)
	// and a given step longer than the voxels (StepWarning), a line each.
	Warnings []string
}

// PoseValues is the length of a pose as Run takes it: source (3), centre
// (3), u (3), v (3) and pixel size (2), as in a geometry file.
const PoseValues = 14

// Compile validates c and compiles the DRR of v onto rows×cols pixels on
// dev (nil: the CPU) for blocks of its batch of poses (0: planned under
// its memory limit); the poses come with each Run. v's values are copied
// and v itself is left as it is: c's Spacing and Origin, when set,
// replace the copy's (an array's voxel size and placement: v's are
// usually 1 mm and 0), and HU or Mu convert its values.
func Compile(c Config, v *volume.Volume, rows, cols int, dev *engine.Device) (_ *Program, err error) {
	if dev, err = engine.InProcess(dev); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
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
	cp := *v
	cp.V = append([]float32(nil), v.V...)
	if c.Spacing != nil {
		cp.Spacing = *c.Spacing
	}
	if c.Origin != nil {
		cp.Origin = *c.Origin
	}
	if err := volume.Check(&cp); err != nil {
		return nil, fmt.Errorf("--volume: %w", err)
	}
	if c.HU {
		volume.ApplyHU(&cp, c.Water())
	}
	s, err := c.Prepare(&cp, rows, cols)
	if err != nil {
		return nil, err
	}
	job := &Job{s: s, rows: rows, cols: cols, noSum: true}
	ses, err := engine.NewSession(job, dev, true)
	if err != nil {
		return nil, err
	}
	return &Program{ses: ses, job: job, stepGiven: c.Step != nil, Rows: rows, Cols: cols}, nil
}

// Poses reads n poses of PoseValues numbers each (a geometry file's
// source, center, u, v and pixel) onto the program's detector and
// validates them.
func (p *Program) Poses(x []float64) ([]ops.Pose, error) {
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
func (p *Program) Orbit(n int, sdd, sid, pixel float64) ([]float64, error) {
	return p.OrbitAbout(n, nil, [3]float64{0, 0, 1}, 0, sdd, sid, pixel)
}

// OrbitAbout is the CLI's --orbit n with --isocenter iso (nil: the
// volume's centre), --axis and --start (degrees), in Run's layout
// (ops.OrbitAbout).
func (p *Program) OrbitAbout(n int, iso *[3]float64, axis [3]float64, start, sdd, sid, pixel float64) ([]float64, error) {
	c := p.job.s.Vol.Centre()
	if iso != nil {
		c = *iso
	}
	poses, err := ops.OrbitAbout(n, c, axis, start, sdd, sid, p.Rows, p.Cols, pixel)
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
// Cols) float32: the line integrals, or Post of them, filtered by
// Filter's stages (their kernels made for these poses' pixel size,
// which must then be the same for all). Neither is kept
// after Run returns.
func (p *Program) Run(x []float64, dst []float32) error {
	poses, err := p.Poses(x)
	if err != nil {
		return err
	}
	per := p.Rows * p.Cols
	if len(dst) != len(poses)*per {
		return fmt.Errorf("%w: out has %d values, want %d poses × %d×%d", engine.ErrBatch, len(dst), len(poses), p.Rows, p.Cols)
	}
	if p.job.s.Step > 0 {
		if err := CheckSamples(p.job.s.Vol, poses, p.job.s.Step, p.stepGiven); err != nil {
			return err
		}
	}
	j := p.job
	if f := j.s.Filter; f != nil {
		if err := f.SetPoses(poses); err != nil {
			return err
		}
	}
	j.s.Poses = poses
	defer func() { j.s.Poses, j.s.Image = nil, nil }()
	if err := j.checkGeometry(); err != nil {
		return err
	}
	j.Sum, j.Max, j.nonzero, j.seen, j.done = 0, 0, 0, 0, 0
	if f := j.s.Post; f != nil {
		f.ResetNonFinite()
	}
	j.s.Image = func(i int, img []float32, _, _ float32) error {
		copy(dst[i*per:(i+1)*per], img)
		return nil
	}
	if err := p.ses.Run(j); err != nil {
		return err
	}
	p.AllMissed, p.Warnings = j.AllMissed(), j.Warnings()
	if p.stepGiven {
		if w := StepWarning(j.s.Vol, j.s.Step); w != "" {
			p.Warnings = append(p.Warnings, w)
		}
	}
	return nil
}

// Volume is the volume the program renders: attenuation per mm (HU or
// Mu applied), placed in world mm. It is the program's own and never
// changes; a caller must not change it either.
func (p *Program) Volume() *volume.Volume { return p.job.s.Vol }

// Step is the trilinear sample spacing in mm, or 0 for Siddon's exact
// path.
func (p *Program) Step() float64 { return p.job.s.Step }

// LineIntegrals says the images are the rays' line integrals: no Post
// formula or Filter applies to them.
func (p *Program) LineIntegrals() bool { return p.job.s.Post == nil && p.job.s.Filter == nil }

// Dtype is the images' dtype, float32.
func (p *Program) Dtype() tensor.Dtype { return tensor.Float32 }

// Close releases the program.
func (p *Program) Close() error { return p.ses.Close() }

// Interrupt stops the call in progress (one made between calls stops the
// next).
func (p *Program) Interrupt() { p.ses.Interrupt() }

// Report says how the calls so far went.
func (p *Program) Report() engine.Report { return p.ses.Report() }

// DOT is the compiled graph as Graphviz DOT.
func (p *Program) DOT() (string, error) { return p.ses.DOT() }
