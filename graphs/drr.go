package graphs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
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

// DRRConfig describes a DRR run.
type DRRConfig struct {
	Vol   *volume.Volume
	Poses []ops.Pose
	Step  float64     // ≤ 0: Siddon's exact path; > 0: trilinear samples Step mm apart on a pose's longest ray (ops.DRR)
	Out   *npy.Writer // optional: (P, Rows, Cols) float32, in pose order
	// Image, when set, receives each pose's image (Rows×Cols, row-major)
	// as it is rendered, with its smallest and largest value.
	Image func(pose int, img []float32, lo, hi float32) error
	// Device runs the DRR op on a GPU (nil: the CPU).
	Device ops.Device
	// Mu names the formula that made the volume's attenuation (the volume
	// holds its result), for the graph's label.
	Mu string
	// Post, when set, is the user's formula applied to every pixel of
	// each image after rendering; FailOnNonFinite makes a NaN or infinite
	// value of it an error.
	Post            *ops.MapFormula
	FailOnNonFinite bool
}

// DRR is the DRR workload as a Job: each batch is a set of poses rendered
// by one replay of the compiled graph.
type DRR struct {
	cfg      DRRConfig
	Sum      float64 // Σ of every line integral, added in pose and pixel order
	Max      float64 // the largest line integral, or 0 if none is positive
	nonzero  int
	rows, cs int
	// first and total place a shard's poses in the run's: poses
	// [first, first + len(Poses)) of total (0, 0: not a shard).
	first, total int
	// done is the number of poses, from the first, a resumed run took
	// from its checkpoint, and restoredNonFinite the NaN or infinite
	// pixels among them.
	done              int
	restoredNonFinite int64
	ckpt              *checkpoint.File // nil: no checkpoint
	// noSum leaves Sum out (a caller in process keeps the images, not the
	// run's totals).
	noSum  bool
	recBuf []byte // the checkpoint records of a batch, reused
	recs   [][]byte
}

// NewDRR checks cfg and returns the Job.
func NewDRR(cfg DRRConfig) (*DRR, error) {
	if cfg.Vol == nil || len(cfg.Vol.V) == 0 {
		return nil, errors.New("drr: config needs a volume")
	}
	if len(cfg.Poses) == 0 {
		return nil, fmt.Errorf("%w: no poses", ops.ErrGeometry)
	}
	for i, p := range cfg.Poses {
		if err := p.Validate(i); err != nil {
			return nil, err
		}
		if p.Rows != cfg.Poses[0].Rows || p.Cols != cfg.Poses[0].Cols {
			return nil, fmt.Errorf("%w: pose %d's detector differs from pose 0's", ops.ErrGeometry, i)
		}
	}
	return &DRR{cfg: cfg, rows: cfg.Poses[0].Rows, cs: cfg.Poses[0].Cols}, nil
}

// Name is "drr".
func (w *DRR) Name() string { return "drr" }

// ItemUnit names the items for the progress bar.
func (w *DRR) ItemUnit() string { return "poses" }

// Dtype is float32: the images.
func (w *DRR) Dtype() tensor.Dtype { return tensor.Float32 }

// Items is the number of poses.
func (w *DRR) Items() int { return len(w.cfg.Poses) - w.done }

// MaxBatch is 16 poses: enough rays to keep every core busy.
func (w *DRR) MaxBatch() int { return 16 }

// Build is poses (batch, 12) → DRR → images (batch, rows, cols) →
// ImageStats → stats (batch, 3): each image's minimum, maximum and nonzero
// pixel count, which give the run's maximum, its all-rays-missed check
// and the PNG scaling. The DRR op runs on the configured device; the
// statistics run on the CPU, on the images it copied back. With Post, the
// user's formula per pixel (MapImages) runs on the device too when it has
// a kernel there (one that reduces over the whole image runs on the CPU).
// The sum of the line integrals is added up in Consume, pixel by pixel in
// order.
func (w *DRR) Build(g *G.ExprGraph, batch int) (in, out []*G.Node, err error) {
	poses := G.NewMatrix(g, tensor.Float64, G.WithShape(batch, ops.PoseWidth), G.WithName("poses"))
	drr := ops.NewDRR(w.cfg.Vol, w.rows, w.cs, w.cfg.Step, batch)
	drr.Mu = w.cfg.Mu
	op, err := ops.OnDevice(drr, w.cfg.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: %w", err)
	}
	img, err := G.ApplyOpWithName(op, "images", poses)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: build graph: %w", err)
	}
	if w.cfg.Post == nil {
		stats, err := G.ApplyOpWithName(ops.NewImageStats(batch, w.rows, w.cs), "stats", img)
		if err != nil {
			return nil, nil, fmt.Errorf("drr: build graph: %w", err)
		}
		return []*G.Node{poses}, []*G.Node{img, stats}, nil
	}
	// The user's formula per pixel: the statistics of its images, and of
	// the line integrals (for the all-rays-missed check).
	pop, err := ops.OnDevice(ops.NewMapImages(w.cfg.Post, batch, w.rows, w.cs), w.cfg.Device)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: %w", err)
	}
	post, err := G.ApplyOpWithName(pop, "post", img)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: build graph: %w", err)
	}
	stats, err := G.ApplyOpWithName(ops.NewImageStats(batch, w.rows, w.cs), "stats", post)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: build graph: %w", err)
	}
	raw, err := G.ApplyOpWithName(ops.NewImageStats(batch, w.rows, w.cs), "ray stats", img)
	if err != nil {
		return nil, nil, fmt.Errorf("drr: build graph: %w", err)
	}
	return []*G.Node{poses}, []*G.Node{post, stats, raw}, nil
}

// StagingBytes counts the output writer's buffers, a PNG's, and a batch's
// checkpoint records (encoded, then with their checksums).
func (w *DRR) StagingBytes(batch int) int64 {
	var b int64
	if w.cfg.Out != nil {
		b += 1<<16 + 8192*8
	}
	if w.ckpt != nil {
		b += 2 * int64(batch) * int64(w.recordBytes()+4)
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
		w.cfg.Poses[w.done+off+r].Encode(d[r*ops.PoseWidth : (r+1)*ops.PoseWidth])
	}
	return nil
}

// Consume adds the batch's line integrals to Sum, takes Max and the
// nonzero count from its statistics, and writes its images.
func (w *DRR) Consume(out []*tensor.Dense, off, n int) error {
	if f := w.cfg.Post; f != nil && w.cfg.FailOnNonFinite && f.NonFinite() > 0 {
		return option.ErrNonFinite("--post", f.NonFinite())
	}
	imgs := out[0].Data().([]float32)
	stats := out[1].Data().([]float64)
	rays := stats
	if len(out) > 2 {
		rays = out[2].Data().([]float64)
	}
	per := w.rows * w.cs
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
		if w.cfg.Image != nil {
			if err := w.cfg.Image(w.done+off+r, img, float32(st[0]), float32(st[1])); err != nil {
				return err
			}
		}
	}
	if w.cfg.Out != nil {
		if err := w.cfg.Out.Write32(imgs[:n*per]); err != nil {
			return err
		}
	}
	return w.save(imgs[:n*per], rays, w.done+off, n)
}

// drrRecordBytes is the size of a checkpoint record of a rows × cols
// image: the pose's count of rays that hit the volume, then its image.
func drrRecordBytes(rows, cols int) int { return 8 + 4*rows*cols }

func (w *DRR) recordBytes() int { return drrRecordBytes(w.rows, w.cs) }

// save appends the batch's n images, of poses first…first+n−1, and their
// rays' statistics to the checkpoint.
func (w *DRR) save(imgs []float32, rays []float64, first, n int) error {
	if w.ckpt == nil {
		return nil
	}
	per, size := w.rows*w.cs, w.recordBytes()
	if cap(w.recBuf) < n*size { // kept between batches: no garbage per batch
		w.recBuf, w.recs = make([]byte, n*size), make([][]byte, n)
	}
	recs := w.recs[:n]
	for r := range recs {
		b := binary.LittleEndian.AppendUint64(w.recBuf[r*size:r*size], uint64(rays[r*ops.ImageStatsWidth+2]))
		for _, v := range imgs[r*per : (r+1)*per] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		recs[r] = b
	}
	return w.ckpt.Append(first, recs)
}

// restorer returns a function that takes the next pose from a checkpoint
// record as rendered: its image is counted and written as Consume does.
// The checkpoint passes poses 0, 1, 2, … in order.
func (w *DRR) restorer() func(int, []byte) error {
	img := make([]float32, w.rows*w.cs)
	return func(pose int, b []byte) error {
		if pose != w.done || w.done == len(w.cfg.Poses) {
			return fmt.Errorf("pose %d restored after %d poses: the checkpoint is corrupt", pose, w.done)
		}
		w.nonzero += int(binary.LittleEndian.Uint64(b))
		for k := range img {
			img[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[8+4*k:]))
			w.Sum += float64(img[k])
		}
		lo, hi := imageRange(img)
		w.Max = max(w.Max, float64(hi))
		if w.cfg.Post != nil {
			w.restoredNonFinite += countNonFinite32(img)
		}
		if w.cfg.Image != nil {
			if err := w.cfg.Image(w.done, img, lo, hi); err != nil {
				return err
			}
		}
		if w.cfg.Out != nil {
			if err := w.cfg.Out.Write32(img); err != nil {
				return err
			}
		}
		w.done++
		return nil
	}
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
	// Mu and Post are the user's formulas, and NonFinite the number of
	// NaN or infinite pixels Post gave.
	Mu        string `json:"mu,omitempty"`
	Post      string `json:"post,omitempty"`
	NonFinite int64  `json:"nonfinite,omitempty"`
	// Range is a shard's poses [lo, hi) and the run's count.
	Range [3]int `json:"range,omitzero"`
}

// Result summarises the run.
func (w *DRR) Result() DRRResult {
	m := "siddon"
	if w.cfg.Step > 0 {
		m = fmt.Sprintf("trilinear (step %g mm)", w.cfg.Step)
	}
	r := DRRResult{Poses: len(w.cfg.Poses), Rows: w.rows, Cols: w.cs, Method: m, Sum: w.Sum, Max: w.Max, Mu: w.cfg.Mu}
	if w.total > 0 {
		r.Range = [3]int{w.first, w.first + len(w.cfg.Poses), w.total}
	}
	if f := w.cfg.Post; f != nil {
		r.Post, r.NonFinite = f.F.Canonical(), f.NonFinite()+w.restoredNonFinite
	}
	return r
}

// SetDevice places the DRR op of the next Compile on dev (nil: the CPU).
func (w *DRR) SetDevice(dev ops.Device) { w.cfg.Device = dev }

// DRRSpec is a DRR run as the user states it: files, sizes and names,
// each text field in its flag's syntax. DefaultDRRSpec holds the defaults.
type DRRSpec struct {
	// Volume is the volume file: .npy, .nii, .nii.gz, .mha, .mhd, or raw
	// with RawShape and RawDtype. "": the Shepp–Logan phantom.
	Volume string
	// RawShape "X,Y,Z" (C order) and RawDtype (uint8, int8, uint16,
	// int16, uint32, int32, float32 or float64, little endian) describe a
	// raw volume.
	RawShape, RawDtype string
	// Series picks a DICOM series by its SeriesInstanceUID when the Volume
	// directory holds several; "": the only one.
	Series string
	// Spacing "sx,sy,sz" and Origin "ox,oy,oz", in mm, override the
	// volume's voxel size and the centre of its voxel (0, 0, 0), in Frame;
	// "": the file's (for .npy and raw files 1,1,1 and 0,0,0) or the
	// phantom's.
	Spacing, Origin string
	// Frame is the world frame of the geometry (poses, orbit centre,
	// Origin): "lps" (patient LPS mm, as DICOM, ITK and plastimatch; "" is
	// the same) or "ras" (nibabel's RAS mm). NIfTI and MetaImage volumes
	// are placed in it by their headers; .npy, raw and the phantom have
	// their index axes along its x, y and z.
	Frame string
	// HU says the volume file is in Hounsfield units, converted to
	// attenuation per mm as μ = MuWater·max(0, 1 + HU/1000).
	HU bool
	// MuWater is the attenuation of water per mm, for HU and the phantom.
	MuWater float64
	// Mu is the user's formula over a voxel's value h giving its
	// attenuation per mm, applied once to the volume before rendering (on
	// the CPU, as the volume is read, whatever the device),
	// e.g. "where(h < -900, 0, 0.02*(1+h/1000))" (instead of HU). Post is
	// one over a pixel's line integral p, applied to every image, e.g.
	// "exp(-p)". A reduction in them (max(h), mean(p)) reduces over the
	// whole volume or image. Params holds their parameters.
	Mu, Post string
	Params   map[string]float64
	// FailOnNonFinite makes a NaN or infinite value of a formula an error.
	FailOnNonFinite bool
	// Size is the phantom's voxels per axis (2 to 1024), without Volume.
	Size int
	// Geometry is a JSON file of poses (ops.ReadGeometry); "": an orbit.
	Geometry string
	// Without Geometry: Orbit poses over 360° about the z axis through the
	// volume's centre, source–detector distance SDD and source–isocentre
	// distance SID in mm, a Detector of "RxC" pixels of Pixel mm.
	Orbit    int
	SDD, SID float64
	Detector string
	Pixel    float64
	// Method is "siddon" (the exact radiological path) or "trilinear".
	Method string
	// Step is trilinear's sample spacing in mm on each pose's longest ray;
	// nil: half the smallest voxel size. Siddon takes none.
	Step *float64
	// Out is a directory for drr.npy, (P, R, C) float32 line integrals;
	// "": nothing written. PNG adds one 16-bit PNG per pose, drr_0000.png …
	// A shard goes to an .npz Out instead, its PNGs written by the merge.
	Out string
	PNG bool
	// Shard renders only shard "i/n" of the poses (0 ≤ i < n, a
	// contiguous range) into an .npz Out, for `tapeloop merge`; Shards
	// splits into this many shards, this job's index read from Env (nil:
	// the process's environment: SLURM_ARRAY_TASK_ID or
	// JOB_COMPLETION_INDEX). Give one or neither.
	Shard  *string
	Shards *int
	Env    func(string) (string, bool)
	// Warn receives warnings about the inputs (a NIfTI file without an
	// sform or qform); nil: discarded.
	Warn io.Writer
	// Resume continues the run whose checkpoint is beside its output (see
	// openCheckpoint); without it, a checkpoint there is refused.
	Resume bool
}

// DefaultDRRSpec is the built-in case: the 128³ Shepp–Logan phantom over
// a 36-pose orbit onto a 200×200 detector of 2 mm pixels, by Siddon.
func DefaultDRRSpec() DRRSpec {
	return DRRSpec{Frame: "lps", MuWater: 0.02, Size: 128, Orbit: 36, SDD: 1020, SID: 510, Detector: "200x200", Pixel: 2, Method: "siddon"}
}

// drrPlan is a DRRSpec's text fields parsed.
type drrPlan struct {
	mu, post        *formula.Formula
	spacing, origin *[3]float64
	frame           volume.Frame
	shape           [3]int
	rows, cols      int
	trilinear       bool
	shard           shardChoice
}

// parse checks the spec without reading any file: the volume's fields,
// then the poses', the method's and the output's.
func (s DRRSpec) parse() (p drrPlan, err error) {
	if p.spacing, err = parseTriple("spacing", s.Spacing); err != nil {
		return p, err
	}
	if p.origin, err = parseTriple("origin", s.Origin); err != nil {
		return p, err
	}
	if p.frame, err = volume.ParseFrame(s.Frame); err != nil {
		return p, err
	}
	if !(s.MuWater > 0) || math.IsInf(s.MuWater, 0) {
		return p, fmt.Errorf("--mu-water %g: must be positive and finite", s.MuWater)
	}
	if s.Mu != "" && s.HU {
		return p, errors.New("--mu and --hu: give one (--mu maps the volume's values to attenuation itself)")
	}
	fs, err := option.ParseFormulas(s.Params,
		option.Formula{Flag: "--mu", Src: s.Mu, Vars: ops.MuVars},
		option.Formula{Flag: "--post", Src: s.Post, Vars: ops.PostVars})
	if err != nil {
		return p, err
	}
	p.mu, p.post = fs[0], fs[1]
	if p.mu == nil && p.post == nil && s.FailOnNonFinite {
		return p, errors.New("--fail-on-nonfinite: it is for --mu or --post, and neither is given")
	}
	if s.Volume != "" {
		if s.RawShape != "" {
			t, err := parseTriple("shape", s.RawShape)
			if err != nil {
				return p, err
			}
			for a := range 3 {
				p.shape[a] = int(t[a])
				if float64(p.shape[a]) != t[a] || p.shape[a] < 1 {
					return p, fmt.Errorf("--shape %q: want three positive integers", s.RawShape)
				}
			}
		}
	} else if s.Series != "" {
		return p, fmt.Errorf("--series %s: picks a DICOM series of --volume, and there is none", s.Series)
	} else if s.Size < 2 || s.Size > 1024 {
		return p, fmt.Errorf("--size %d: want 2 to 1024", s.Size)
	}
	if s.Geometry == "" {
		if _, err := fmt.Sscanf(s.Detector, "%dx%d", &p.rows, &p.cols); err != nil || p.rows < 1 || p.cols < 1 ||
			fmt.Sprintf("%dx%d", p.rows, p.cols) != s.Detector {
			return p, fmt.Errorf("--detector %q: want RxC with R, C ≥ 1, e.g. 200x200", s.Detector)
		}
		if err := ops.CheckOrbit(s.Orbit, s.SDD, s.SID, p.rows, p.cols, s.Pixel); err != nil {
			return p, err
		}
	}
	switch s.Method {
	case "siddon":
		if s.Step != nil {
			return p, fmt.Errorf("--step: only --method trilinear samples")
		}
	case "trilinear":
		p.trilinear = true
		if s.Step != nil && (!(*s.Step > 0) || math.IsInf(*s.Step, 0)) {
			return p, fmt.Errorf("--step %g: must be positive", *s.Step)
		}
	default:
		return p, fmt.Errorf("--method %q: want siddon or trilinear", s.Method)
	}
	if s.PNG && s.Out == "" {
		return p, fmt.Errorf("--png: needs --out DIR")
	}
	if p.shard, err = parseShard(s.Shard, s.Shards, s.Env, s.Out); err != nil {
		return p, err
	}
	if s.Resume && s.Out == "" {
		return p, errors.New("--resume: it needs --out: a run without output keeps no checkpoint")
	}
	return p, nil
}

// Validate checks what can be checked before any file is read.
func (s DRRSpec) Validate() error {
	_, err := s.parse()
	return err
}

// parseTriple parses "x,y,z" into three finite numbers; "" is nil.
func parseTriple(name, s string) (*[3]float64, error) {
	if s == "" {
		return nil, nil
	}
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return nil, fmt.Errorf("--%s %q: want three comma-separated numbers", name, s)
	}
	var v [3]float64
	for i, x := range f {
		y, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || math.IsNaN(y) || math.IsInf(y, 0) {
			return nil, fmt.Errorf("--%s %q: %q is not a finite number", name, s, x)
		}
		v[i] = y
	}
	return &v, nil
}

// DRRTask is an opened DRR run.
type DRRTask struct {
	job    *DRR
	claim  *claim // the checkpoint's lock, and what it holds
	ckp    *checkpoint.File
	dir    string
	dirs   []string         // directories Open created for Out, outermost first
	npyOut *atomicfile.File // drr.npy, or a shard's archive
	npz    *npy.NPZWriter   // a shard's archive
	writer *npy.Writer
	pngs   []*atomicfile.File // written and closed, renamed on Commit
}

// OpenDRR validates s, reads the volume, builds the poses and, with
// withOutput, creates the outputs as temporary files in Out (made if
// missing). With withOutput false (for printing the graph), Out and PNG
// are ignored.
func OpenDRR(s DRRSpec, dev *engine.Device, withOutput bool) (_ *DRRTask, err error) {
	p, err := s.parse()
	if err != nil {
		return nil, err
	}
	if s.Volume != "" {
		if err := checkVolumeFits("drr", s.Volume, volume.Options{Shape: p.shape, Dtype: s.RawDtype, Series: s.Series}, dev.MemLimit); err != nil {
			return nil, err
		}
	}
	if s.Volume == "" {
		if err := checkVoxelsFit("drr's phantom", [3]int64{int64(s.Size), int64(s.Size), int64(s.Size)}, dev.MemLimit); err != nil {
			return nil, fmt.Errorf("--size %d: %w", s.Size, err)
		}
	}
	v, err := s.loadVolume(p)
	if err != nil {
		return nil, err
	}
	poses, err := s.poses(p, v)
	if err != nil {
		return nil, err
	}
	lo, hi, err := p.shard.items(len(poses), "poses", s.Out, withOutput)
	if err != nil {
		return nil, err
	}
	cfg := DRRConfig{Vol: v, Poses: poses, FailOnNonFinite: s.FailOnNonFinite}
	if err := s.prepare(p, &cfg, poses[0].Rows, poses[0].Cols); err != nil {
		return nil, err
	}
	if p.trilinear {
		if err := checkSamples(v, poses, cfg.Step, s.Step != nil); err != nil {
			return nil, err
		}
	}
	t := &DRRTask{dir: s.Out}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	// A shard renders its poses and writes their images, with what they
	// depend on, to an archive; the merge writes drr.npy and the PNGs.
	if p.shard.sharded {
		fp := s.fingerprint(v, poses, cfg, dev)
		cfg.Poses = poses[lo:hi]
		if withOutput {
			r, c := poses[0].Rows, poses[0].Cols
			h := checkpoint.Header{Workload: shard.DRR, Fingerprint: fp, Lo: lo, Hi: hi, Record: drrRecordBytes(r, c)}
			if t.claim, err = claimCheckpoint(s.Out, h, s.Resume, hi-lo, true, "poses", s.warn); err != nil {
				return nil, err
			}
			atomicfile.Sweep(filepath.Dir(s.Out))
			size := engine.AddBytes(sysmem.Mul(int64(hi-lo), int64(r), int64(c), 4), checkpointSpace(hi-lo-t.claim.Saved(), h.Record))
			if err := atomicfile.CheckSpace(s.Out, size); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			if t.npyOut, err = atomicfile.Create(s.Out); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			t.npz = npy.NewNPZWriter(t.npyOut)
			meta := shard.RangeMeta{Workload: shard.DRR, Items: len(poses), Lo: lo, Hi: hi, Index: p.shard.index, Count: p.shard.count,
				Fingerprint: fp, Rows: r, Cols: c, PNG: s.PNG}
			if err = shard.WriteRangeMeta(t.npz, meta); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			if t.writer, err = t.npz.Create("drr", npy.Float32, []int{hi - lo, r, c}); err != nil {
				return nil, fmt.Errorf("--out: %w", err)
			}
			cfg.Out = t.writer
		}
		if t.job, err = NewDRR(cfg); err != nil {
			return nil, err
		}
		t.job.first, t.job.total = lo, len(poses)
		if withOutput {
			if err := t.resume(); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	if withOutput && s.Out != "" {
		if t.dirs, err = atomicfile.MakeDirs(s.Out); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		rows, cols := poses[0].Rows, poses[0].Cols
		h := checkpoint.Header{Workload: shard.DRR, Fingerprint: s.fingerprint(v, poses, cfg, dev), Lo: 0, Hi: len(poses), Record: drrRecordBytes(rows, cols)}
		if t.claim, err = claimCheckpoint(filepath.Join(s.Out, "drr.npy"), h, s.Resume, len(poses), true, "poses", s.warn); err != nil {
			return nil, err
		}
		// What a killed run left is removed before the space is counted:
		// a resumed run needs the room its first run had, less the
		// records already in the checkpoint.
		atomicfile.Sweep(s.Out)
		size := sysmem.Mul(int64(len(poses)), int64(rows), int64(cols), 4)
		if s.PNG {
			size = sysmem.Mul(int64(len(poses)), int64(rows), int64(cols), 6)
		}
		size = engine.AddBytes(size, checkpointSpace(len(poses)-t.claim.Saved(), h.Record))
		if err := atomicfile.CheckSpace(filepath.Join(s.Out, "drr.npy"), size); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		if t.npyOut, err = atomicfile.Create(filepath.Join(s.Out, "drr.npy")); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		p := poses[0]
		if t.writer, err = npy.NewWriter(t.npyOut, npy.Float32, []int{len(poses), p.Rows, p.Cols}); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		cfg.Out = t.writer
		if s.PNG {
			cfg.Image = func(i int, img []float32, lo, hi float32) error { return t.writePNG(i, img, lo, hi, p.Rows, p.Cols) }
		}
	}
	if t.job, err = NewDRR(cfg); err != nil {
		return nil, err
	}
	if withOutput && s.Out != "" {
		if err := t.resume(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// prepare applies --mu to cfg.Vol (the volume holds attenuation after
// it), compiles --post for rows×cols images and sets the trilinear step.
func (s DRRSpec) prepare(p drrPlan, cfg *DRRConfig, rows, cols int) error {
	v := cfg.Vol
	if p.mu != nil {
		mu, err := ops.NewMapFormula(p.mu, len(v.V))
		if err != nil {
			return err
		}
		mu.Apply32(v.V, v.V)
		if n := mu.NonFinite(); n > 0 {
			return fmt.Errorf("--mu %q: gave %d non-finite attenuations (NaN or ±Inf); a volume must be finite", p.mu, n)
		}
		cfg.Mu = p.mu.Canonical()
	}
	if p.post != nil {
		var err error
		if cfg.Post, err = ops.NewMapFormula(p.post, rows*cols); err != nil {
			return err
		}
	}
	cfg.Step = 0
	if p.trilinear {
		cfg.Step = 0.5 * min(v.Spacing[0], v.Spacing[1], v.Spacing[2])
		if s.Step != nil {
			cfg.Step = *s.Step
		}
	}
	return nil
}

// resume writes the poses the claimed checkpoint holds, when resumed,
// and opens it for the poses to come.
func (t *DRRTask) resume() (err error) {
	if t.ckp, err = t.claim.open(len(t.job.cfg.Poses), t.job.restorer()); err != nil {
		return err
	}
	t.job.ckpt = t.ckp
	return nil
}

// warn writes a warning line to s.Warn, if any.
func (s DRRSpec) warn(msg string) {
	if s.Warn != nil {
		fmt.Fprintf(s.Warn, "tapeloop: warning: %s\n", msg)
	}
}

// fingerprint identifies what a shard's images depend on: the volume as
// rendered (its values after --hu or --mu, its grid and placement), every
// pose of the run, the method and step, the formulas with their
// parameters, the PNG choice and the kind of device (a GPU rounds
// otherwise than the CPU).
func (s DRRSpec) fingerprint(v *volume.Volume, poses []ops.Pose, cfg DRRConfig, dev *engine.Device) string {
	f := newRunPrint(shard.DRR)
	f.ints(int(v.N[0]), int(v.N[1]), int(v.N[2]))
	f.f32s(v.V)
	f.f64s(v.Origin[:]...)
	f.f64s(v.Spacing[:]...)
	for _, r := range v.Direction {
		f.f64s(r[:]...)
	}
	f.ints(len(poses))
	enc := make([]float64, ops.PoseWidth)
	for _, p := range poses {
		p.Encode(enc)
		f.f64s(enc...)
		f.ints(p.Rows, p.Cols)
	}
	f.f64s(cfg.Step)
	f.str(cfg.Mu)
	if cfg.Post != nil {
		f.str(cfg.Post.F.Canonical())
	}
	f.params(s.Params)
	f.str(fmt.Sprint(s.PNG))
	f.str(dev.Kind())
	return f.sum()
}

// loadVolume reads Volume, or makes the phantom, and applies the spec's
// spacing, origin and units.
func (s DRRSpec) loadVolume(p drrPlan) (*volume.Volume, error) {
	if s.Volume != "" {
		opt := volume.Options{Spacing: p.spacing, Origin: p.origin, Shape: p.shape, Dtype: s.RawDtype, Frame: p.frame, Warn: s.Warn, Series: s.Series}
		v, err := volume.Load(s.Volume, opt)
		if err != nil {
			return nil, fmt.Errorf("--volume: %w", err)
		}
		if s.HU {
			volume.ApplyHU(v, s.MuWater)
		}
		return v, nil
	}
	v := volume.Phantom(s.Size, 192, s.MuWater)
	if p.spacing != nil {
		v.Spacing = *p.spacing
	}
	if p.origin != nil {
		v.Origin = *p.origin
	}
	if err := volume.Check(v); err != nil {
		return nil, err
	}
	return v, nil
}

// poses reads Geometry (world mm, in Frame), or builds the orbit about
// v's centre, the centre of its box placed by its origin, spacing and
// direction.
func (s DRRSpec) poses(p drrPlan, v *volume.Volume) ([]ops.Pose, error) {
	if s.Geometry != "" {
		f, err := os.Open(s.Geometry)
		if err != nil {
			return nil, fmt.Errorf("--geometry: %w", err)
		}
		defer f.Close()
		poses, err := ops.ReadGeometry(f)
		if err != nil {
			return nil, fmt.Errorf("--geometry: %s: %w", s.Geometry, err)
		}
		return poses, nil
	}
	return ops.Orbit(s.Orbit, v.Centre(), s.SDD, s.SID, p.rows, p.cols, s.Pixel)
}

// writePNG writes pose i's image, its line integrals scaled from [lo, hi]
// to [0, 65535], to a temporary file renamed with the others on Commit.
func (t *DRRTask) writePNG(i int, img []float32, lo, hi float32, rows, cols int) error {
	g := image.NewGray16(image.Rect(0, 0, cols, rows))
	scale := float32(0)
	if hi > lo {
		scale = 65535 / (hi - lo)
	}
	for k, v := range img {
		x := uint16(math.Round(float64((v - lo) * scale)))
		g.Pix[2*k], g.Pix[2*k+1] = byte(x>>8), byte(x)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, g); err != nil {
		return fmt.Errorf("--png: %w", err)
	}
	f, err := atomicfile.Create(filepath.Join(t.dir, fmt.Sprintf("drr_%04d.png", i)))
	if err != nil {
		return fmt.Errorf("--png: %w", err)
	}
	t.pngs = append(t.pngs, f)
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("--png: %w", err)
	}
	return f.Close()
}

// Job is the DRR job.
func (t *DRRTask) Job() engine.Job { return t.job }

// Result is the run's DRRResult.
func (t *DRRTask) Result() any { return t.job.Result() }

// Summary is the run's DRRResult.
func (t *DRRTask) Summary() DRRResult { return t.job.Result() }

// AllMissed reports whether every ray of the run missed the volume.
func (t *DRRTask) AllMissed() bool { return t.job.AllMissed() }

// Commit flushes drr.npy (or closes a shard's archive) and renames it and
// the PNGs into place.
func (t *DRRTask) Commit() error {
	if t.npyOut == nil {
		return nil
	}
	flush := t.writer.Flush
	if t.npz != nil {
		flush = t.npz.Close
	}
	if err := flush(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	// The PNGs go first and drr.npy last: a run killed in between has no
	// drr.npy yet, and its checkpoint and temporary files say so; the
	// next run in the directory removes the temporaries.
	if err := t.npyOut.Sync(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, p := range t.pngs {
		if err := p.Rename(); err != nil {
			return fmt.Errorf("--png: %w", err)
		}
	}
	if err := t.npyOut.Commit(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	atomicfile.KeepDirs(t.dirs)
	t.npyOut, t.dirs = nil, nil
	err := removeCheckpoint(&t.ckp)
	t.claim.release()
	return err
}

// Close removes the outputs not committed, and the directories OpenDRR
// made for them when they are left empty.
func (t *DRRTask) Close() error {
	if t.npyOut != nil {
		t.npyOut.Abort()
		t.npyOut = nil
	}
	for _, p := range t.pngs {
		p.Abort() // a no-op on those renamed
	}
	t.pngs = nil
	closeCheckpoint(&t.ckp)
	t.claim.release()
	atomicfile.RemoveDirs(t.dirs)
	t.dirs = nil
	return nil
}

// Unfinished is err, the error that ended the run, saying what the
// checkpoint holds and how to continue.
func (t *DRRTask) Unfinished(err error) error { return unfinished(t.job.Name(), err, t.ckp) }
