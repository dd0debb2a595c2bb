package drr

import (
	"errors"
	"fmt"
	"math"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// Setup is what a Job renders: a volume of attenuations, its poses, the
// method and formulas (Config.Prepare fills those), and where each
// pose's image goes.
type Setup struct {
	Vol   *volume.Volume
	Poses []ops.Pose
	Step  float64 // ≤ 0: Siddon's exact path; > 0: trilinear samples Step mm apart on a pose's longest ray (ops.DRR)
	// Mu names the formula that made the volume's attenuation (the volume
	// holds its result), for the graph's label.
	Mu string
	// Post, when set, is the user's formula applied to every pixel of
	// each image after rendering; FailOnNonFinite makes a NaN or infinite
	// value of it an error.
	Post            *ops.MapFormula
	FailOnNonFinite bool
	// Filter, when set, filters every image after Post (the line
	// integrals without it), stage after stage; its kernels are made
	// for the poses' pixel size (Filter.SetPoses).
	Filter *Filter
	// Strict makes a fault of the geometry (CheckGeometry, or a pose
	// whose every ray misses the volume) an error; else Warnings lists
	// them.
	Strict bool
	// Device runs the DRR op on a GPU (nil: the CPU).
	Device ops.Device
	// Out, when set, receives the images in pose order, a batch at a
	// time: (n, Rows, Cols) float32 values, row-major.
	Out Writer
	// Image, when set, receives each pose's image (Rows×Cols, row-major)
	// as it is rendered, with its smallest and largest value.
	Image func(pose int, img []float32, lo, hi float32) error
	// First and Total place a shard's poses in the run's: Poses are poses
	// [First, First + len(Poses)) of Total (0, 0: not a shard).
	First, Total int
}

// Writer takes images as float32 values (an .npy file's writer).
type Writer interface {
	Write32([]float32) error
}

// Saver keeps the poses a Job has finished, so that a later run can take
// them back with Restore instead of rendering them again (a checkpoint).
type Saver interface {
	// Save keeps poses first … first+n−1: their images, n×Rows×Cols
	// values, and for each the number of its pixels whose ray hit the
	// volume (len(hits) is n).
	Save(first int, imgs []float32, hits []int) error
	// StagingBytes is the memory Save holds for a batch of n poses.
	StagingBytes(n int) int64
}

// Job is the DRR workload as an engine.Job: each batch is a set of poses
// rendered by one replay of the compiled graph.
type Job struct {
	s          Setup
	Sum        float64 // Σ of every line integral, added in pose and pixel order
	Max        float64 // the largest line integral, or 0 if none is positive
	nonzero    int     // pixels with a nonzero line integral
	seen       int     // poses rendered or restored
	rows, cols int
	// done is the number of poses, from the first, a resumed run took
	// with Restore, and restoredNonFinite the NaN or infinite pixels
	// among them.
	done              int
	restoredNonFinite int64
	saver             Saver // nil: none
	// noSum leaves Sum out (a caller in process keeps the images, not the
	// run's totals).
	noSum bool
	hits  []int // a batch's hits for the Saver, reused
	// geometry holds CheckGeometry's lines, missed the poses whose every
	// ray missed the volume.
	geometry []string
	missed   finding
}

// New checks s and returns the Job.
func New(s Setup) (*Job, error) {
	if s.Vol == nil || len(s.Vol.V) == 0 {
		return nil, errors.New("drr: config needs a volume")
	}
	if len(s.Poses) == 0 {
		return nil, fmt.Errorf("%w: no poses", ops.ErrGeometry)
	}
	for i, p := range s.Poses {
		if err := p.Validate(i); err != nil {
			return nil, err
		}
		if p.Rows != s.Poses[0].Rows || p.Cols != s.Poses[0].Cols {
			return nil, fmt.Errorf("%w: pose %d's detector differs from pose 0's", ops.ErrGeometry, i)
		}
	}
	if s.Filter != nil {
		if err := s.Filter.SetPoses(s.Poses); err != nil {
			return nil, err
		}
	}
	w := &Job{s: s, rows: s.Poses[0].Rows, cols: s.Poses[0].Cols}
	if err := w.checkGeometry(); err != nil {
		return nil, err
	}
	return w, nil
}

// checkGeometry finds the faults of the poses' geometry (CheckGeometry)
// and the poses whose every ray misses the volume, before any is
// rendered; with Strict either is an error.
func (w *Job) checkGeometry() error {
	w.geometry, w.missed = CheckGeometry(w.s.Vol, w.s.Poses, w.s.First), missedPoses(w.s.Vol, w.s.Poses, w.s.First)
	switch {
	case !w.s.Strict:
	case len(w.geometry) > 0:
		return fmt.Errorf("%w: --strict: %s", ops.ErrGeometry, w.geometry[0])
	case w.missed.n > 0:
		return fmt.Errorf("%w: --strict: %s", ops.ErrGeometry, w.Missed())
	}
	return nil
}

// total is the number of poses of the run (of all shards).
func (w *Job) total() int {
	if w.s.Total > 0 {
		return w.s.Total
	}
	return len(w.s.Poses)
}

// Warnings are the faults of the geometry (CheckGeometry), the poses
// whose every ray misses the volume (Missed), and, after a run in which
// some rays cross the volume, a line if every image is 0 (Blank): a line
// each.
func (w *Job) Warnings() []string {
	out := append([]string(nil), w.geometry...)
	for _, m := range [...]string{w.Missed(), w.Blank()} {
		if m != "" {
			out = append(out, m)
		}
	}
	return out
}

// Blank is a line when every pose is rendered, some rays cross the
// volume, and yet every line integral is 0: the volume holds only zeros
// where the rays pass (or --mu-water scales them to nothing); "" else.
func (w *Job) Blank() string {
	if w.seen < len(w.s.Poses) || w.nonzero > 0 || w.AllMissed() {
		return ""
	}
	return "every image is 0: the rays cross the volume's box but meet only voxels of 0 (after --mu-water, if given); check the volume's values and units"
}

// GeometryWarnings are the lines known before the run: CheckGeometry's
// for the run's poses, and Missed.
func (w *Job) GeometryWarnings() []string {
	if m := w.Missed(); m != "" {
		return append(w.geometry[:len(w.geometry):len(w.geometry)], m)
	}
	return w.geometry
}

// Missed is the line about the poses rendered so far whose every ray
// missed the volume, "" when there are none.
func (w *Job) Missed() string {
	if w.missed.n == 0 {
		return ""
	}
	f := w.missed
	return missedLine(w.s.Vol, w.s.Poses[f.first-w.s.First], f, w.total())
}

// SetSaver makes the Job hand each batch it finishes to sv.
func (w *Job) SetSaver(sv Saver) { w.saver = sv }

// Name is "drr".
func (w *Job) Name() string { return "drr" }

// ItemUnit names the items for the progress bar.
func (w *Job) ItemUnit() string { return "poses" }

// Dtype is float32: the images.
func (w *Job) Dtype() tensor.Dtype { return tensor.Float32 }

// Items is the number of poses left to render.
func (w *Job) Items() int { return len(w.s.Poses) - w.done }

// MaxBatch is 16 poses: enough rays to keep every core busy.
func (w *Job) MaxBatch() int { return 16 }

// Build is poses (batch, 12) → DRR → images (batch, rows, cols) →
// ImageStats → stats (batch, 3): each image's minimum, maximum and nonzero
// pixel count, which give the run's maximum, its all-zero check
// and the PNG scaling. The DRR op runs on the configured device; the
// statistics run on the CPU, on the images it copied back. With Post, the
// user's formula per pixel (MapImages) comes next, on the device too when
// it has a kernel there (one that reduces over the whole image runs on the
// CPU); then each Filter stage (Filter2D), on the device. With either,
// the statistics are of the last stage's images, and those of the line
// integrals give the all-zero check. The sum of the images is added
// up in Consume, pixel by pixel in order.
func (w *Job) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	poses := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, ops.PoseWidth), G.WithName("poses"))
	drr := ops.NewDRR(w.s.Vol, w.rows, w.cols, w.s.Step, batch)
	drr.Mu = w.s.Mu
	op, err := ops.OnDevice(drr, w.s.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: %w", err)
	}
	img, err := G.ApplyOpWithName(op, "images", poses)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: build graph: %w", err)
	}
	last := img
	stage := func(o G.Op, name string) error {
		placed, err := ops.OnDevice(o, w.s.Device)
		if err != nil {
			return fmt.Errorf("drr: %w", err)
		}
		if last, err = G.ApplyOpWithName(placed, name, last); err != nil {
			return fmt.Errorf("drr: build graph: %w", err)
		}
		return nil
	}
	if w.s.Post != nil {
		if err := stage(ops.NewMapImages(w.s.Post, batch, w.rows, w.cols), "post"); err != nil {
			return nil, nil, err
		}
	}
	if f := w.s.Filter; f != nil {
		for i, k := range f.Kernels {
			if err := stage(ops.NewFilter2D(k, batch, w.rows, w.cols), fmt.Sprintf("filter %d", i+1)); err != nil {
				return nil, nil, err
			}
		}
	}
	stats, err := G.ApplyOpWithName(ops.NewImageStats(batch, w.rows, w.cols), "stats", last)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: build graph: %w", err)
	}
	if last == img {
		return []*G.Node{poses}, []*G.Node{img, stats}, nil
	}
	raw, err := G.ApplyOpWithName(ops.NewImageStats(batch, w.rows, w.cols), "ray stats", img)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: build graph: %w", err)
	}
	return []*G.Node{poses}, []*G.Node{last, stats, raw}, nil
}

// StagingBytes counts the Out writer's buffers (an .npy writer's), a
// PNG's, and what the Saver holds for a batch.
func (w *Job) StagingBytes(batch int) int64 {
	var b int64
	if w.s.Out != nil {
		b += npy.WriterBytes
	}
	if w.saver != nil {
		b += w.saver.StagingBytes(batch)
	}
	if w.s.Image != nil {
		b += int64(w.rows*w.cols) * 2 * 2
	}
	return b
}

// Feed encodes poses [off, off+n).
func (w *Job) Feed(in []*tensor.Dense, off, n int) error {
	d := in[0].Data().([]float64)
	for r := range n {
		w.s.Poses[w.done+off+r].Encode(d[r*ops.PoseWidth : (r+1)*ops.PoseWidth])
	}
	return nil
}

// Consume adds the batch's line integrals to Sum, takes Max and the
// nonzero count from its statistics, writes its images and saves them.
func (w *Job) Consume(out []*tensor.Dense, off, n int) error {
	if f := w.s.Post; f != nil && w.s.FailOnNonFinite && f.NonFinite() > 0 {
		return option.ErrNonFinite("--post", f.NonFinite())
	}
	imgs := out[0].Data().([]float32)
	stats := out[1].Data().([]float64)
	rays := stats
	if len(out) > 2 {
		rays = out[2].Data().([]float64)
	}
	per := w.rows * w.cols
	for r := range n {
		img := imgs[r*per : (r+1)*per]
		if !w.noSum {
			for _, v := range img {
				w.Sum += float64(v)
			}
		}
		st := stats[r*ops.ImageStatsWidth : (r+1)*ops.ImageStatsWidth]
		w.Max = max(w.Max, st[1])
		w.nonzero += int(rays[r*ops.ImageStatsWidth+2])
		w.seen++
		if w.s.Image != nil {
			if err := w.s.Image(w.done+off+r, img, float32(st[0]), float32(st[1])); err != nil {
				return err
			}
		}
	}
	if w.s.Out != nil {
		if err := w.s.Out.Write32(imgs[:n*per]); err != nil {
			return err
		}
	}
	if w.saver == nil {
		return nil
	}
	if cap(w.hits) < n { // kept between batches: no garbage per batch
		w.hits = make([]int, n)
	}
	hits := w.hits[:n]
	for r := range hits {
		hits[r] = int(rays[r*ops.ImageStatsWidth+2])
	}
	return w.saver.Save(w.done+off, imgs[:n*per], hits)
}

// Restore takes the next pose, as a run before this one rendered and
// saved it, instead of rendering it: its image (Rows×Cols values) and the
// number of its pixels whose ray hit the volume are counted and written
// as Consume does. Poses come back in order, 0, 1, 2, …, before the
// run.
func (w *Job) Restore(pose int, img []float32, hits int) error {
	if pose != w.done || w.done == len(w.s.Poses) {
		return fmt.Errorf("pose %d restored after %d poses: the checkpoint is corrupt", pose, w.done)
	}
	w.nonzero += hits
	w.seen++
	for _, v := range img {
		w.Sum += float64(v)
	}
	lo, hi := ImageRange(img)
	w.Max = max(w.Max, float64(hi))
	if w.s.Post != nil {
		w.restoredNonFinite += countNonFinite32(img)
	}
	if w.s.Image != nil {
		if err := w.s.Image(w.done, img, lo, hi); err != nil {
			return err
		}
	}
	if w.s.Out != nil {
		if err := w.s.Out.Write32(img); err != nil {
			return err
		}
	}
	w.done++
	return nil
}

// ImageRange is an image's smallest and largest value, taken as
// ops.ImageStats takes them (float32, Go's min and max), which scale its
// PNG.
func ImageRange(img []float32) (lo, hi float32) {
	lo, hi = float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range img {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// countNonFinite32 counts the NaN and infinite values of v.
func countNonFinite32(v []float32) int64 {
	var n int64
	for _, x := range v {
		if x != x || math.IsInf(float64(x), 0) {
			n++
		}
	}
	return n
}

// AllMissed reports whether every ray of the run misses the volume.
func (w *Job) AllMissed() bool { return w.missed.n == len(w.s.Poses) }

// Result is the result block of a DRR report.
type Result struct {
	Poses  int     `json:"poses"`
	Rows   int     `json:"rows"`
	Cols   int     `json:"cols"`
	Method string  `json:"method"`
	Sum    float64 `json:"sum"`
	Max    float64 `json:"max"`
	// Mu and Post are the user's formulas, and NonFinite the number of
	// NaN or infinite pixels Post gave.
	Mu        string `json:"mu,omitempty"`
	Post      string `json:"post,omitempty"`
	NonFinite int64  `json:"nonfinite,omitempty"`
	// Filter is the filter stages applied after Post, in order, written
	// out in full and joined by "; ".
	Filter string `json:"filter,omitempty"`
	// Range is a shard's poses [lo, hi) and the run's count.
	Range [3]int `json:"range,omitzero"`
}

// Result summarises the run.
func (w *Job) Result() Result {
	m := "siddon"
	if w.s.Step > 0 {
		m = fmt.Sprintf("trilinear (step %g mm)", w.s.Step)
	}
	r := Result{Poses: len(w.s.Poses), Rows: w.rows, Cols: w.cols, Method: m, Sum: w.Sum, Max: w.Max, Mu: w.s.Mu}
	if w.s.Total > 0 {
		r.Range = [3]int{w.s.First, w.s.First + len(w.s.Poses), w.s.Total}
	}
	if f := w.s.Post; f != nil {
		r.Post, r.NonFinite = f.F.Canonical(), f.NonFinite()+w.restoredNonFinite
	}
	if f := w.s.Filter; f != nil {
		r.Filter = strings.Join(f.Stages(), "; ")
	}
	return r
}

// SetDevice places the DRR op of the next Compile on dev (nil: the CPU).
func (w *Job) SetDevice(dev ops.Device) { w.s.Device = dev }
