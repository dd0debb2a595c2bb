package filejob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/shard"
	"github.com/tapeloop/tapeloop/internal/stackfile"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/internal/warnings"
	"github.com/tapeloop/tapeloop/ops"
)

// DRRSpec is a DRR run as the command line states it: the options of the
// computation (drr.Config), and the data and files around it: the
// volume's file or the phantom, the poses' file or the orbit, the
// outputs, shards and resume. Its own text fields are in their flags'
// syntax. DefaultDRRSpec holds the defaults.
type DRRSpec struct {
	drr.Config
	// Volume is the volume file: .npy, .nii, .nii.gz, .mha, .mhd, or raw
	// with RawShape and RawDtype. "": the Shepp–Logan phantom.
	Volume string
	// RawShape "X,Y,Z" (C order) and RawDtype (uint8, int8, uint16,
	// int16, uint32, int32, float32 or float64, little endian) describe a
	// raw volume.
	RawShape, RawDtype string
	// RawOrder is the order of a raw volume's voxels in the file: "zyx"
	// (also ""; C order: x the slowest axis, z the fastest, as NumPy
	// writes) or "xyz" (x fastest, as Fortran, MATLAB and many scanners'
	// and InVesalius' exports write).
	RawOrder string
	// Series picks a DICOM series by its SeriesInstanceUID when the Volume
	// directory holds several; "": the only one.
	Series string
	// Size is the phantom's voxels per axis (2 to 1024), without Volume.
	Size int
	// Geometry is a JSON file of poses (ops.ReadGeometryFrame); "": an orbit.
	Geometry string
	// Without Geometry: Orbit poses over 360° about the z axis through the
	// volume's centre, source–detector distance SDD and source–isocentre
	// distance SID in mm, a Detector of "RxC" pixels of Pixel mm.
	Orbit    int
	SDD, SID float64
	Detector string
	Pixel    float64
	// Isocenter "x,y,z" (mm, in Frame) is the point the orbit turns about
	// ("": the volume's centre), Start its first pose's angle in degrees
	// and Axis the axis it turns about: "x", "y", "z" (also "") or a
	// vector "ax,ay,az" (ops.OrbitAbout).
	Isocenter string
	Start     float64
	Axis      string
	// Out is a directory for drr.npy, (P, R, C) float32 line integrals;
	// "": nothing written. PNG adds one 16-bit PNG per pose, drr_0000.png …
	// A shard goes to an .npz Out instead, its PNGs written by the merge.
	Out string
	PNG bool
	// Format lists the files of the images Out receives, comma-separated
	// (parseFormats): npy (drr.npy), mha (drr.mha, a MetaImage) and tiff
	// (drr.tiff, a multi-page float32 TIFF); "": npy. A shard records it
	// and the merge writes them.
	Format string
	// PNGScale is how the PNGs map line integrals to gray: "image" (also
	// ""; each image from its own smallest to its largest value) or
	// "global" (every image over the run's smallest to largest). Window
	// and Level, given together, map [Level − Window/2, Level + Window/2]
	// instead, clipping what lies outside.
	PNGScale      string
	Window, Level *float64
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
	return DRRSpec{Config: drr.DefaultConfig(), Size: 128, Orbit: 36, SDD: 1020, SID: 510, Detector: "200x200", Pixel: 2}
}

// drrPlan is a DRRSpec's text fields parsed.
type drrPlan struct {
	frame      volume.Frame
	shape      [3]int
	xFastest   bool // a raw volume's voxels in x-fastest order
	png        pngScale
	iso        *[3]float64 // the orbit's isocentre; nil: the volume's centre
	axis       [3]float64  // the orbit's axis
	rows, cols int
	shard      shardChoice
	formats    []string // Format parsed: npy, mha, tiff, in that order
}

// parse checks the spec without reading any file: the Config, then the
// volume's fields, the poses' and the output's.
func (s DRRSpec) parse() (p drrPlan, err error) {
	if err := s.Config.Validate(); err != nil {
		return p, err
	}
	if p.frame, err = volume.ParseFrame(s.Frame); err != nil {
		return p, err
	}
	switch s.RawOrder {
	case "", "zyx":
	case "xyz":
		p.xFastest = true
	default:
		return p, fmt.Errorf("--order %q: want zyx (C order, z fastest) or xyz (x fastest)", s.RawOrder)
	}
	if s.RawOrder != "" && (s.Volume == "" || s.RawShape == "") {
		return p, errors.New("--order: it is for a raw --volume, with --shape and --dtype")
	}
	if s.Volume != "" {
		if s.RawShape != "" {
			t, err := drr.ParseTriple("shape", s.RawShape)
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
		if p.iso, err = drr.ParseTriple("isocenter", s.Isocenter); err != nil {
			return p, err
		}
		switch s.Axis {
		case "", "z":
			p.axis = [3]float64{0, 0, 1}
		case "x":
			p.axis = [3]float64{1, 0, 0}
		case "y":
			p.axis = [3]float64{0, 1, 0}
		default:
			a, err := drr.ParseTriple("axis", s.Axis)
			if err != nil || a[0] == 0 && a[1] == 0 && a[2] == 0 {
				return p, fmt.Errorf("--axis %q: want x, y, z or a nonzero vector ax,ay,az", s.Axis)
			}
			p.axis = *a
		}
		if math.IsNaN(s.Start) || math.IsInf(s.Start, 0) {
			return p, fmt.Errorf("--start %g: want a finite angle in degrees", s.Start)
		}
	}
	if s.PNG && s.Out == "" {
		return p, fmt.Errorf("--png: needs --out DIR")
	}
	if p.formats, err = parseFormats(s.Format); err != nil {
		return p, err
	}
	if s.Format != "" && s.Out == "" {
		return p, fmt.Errorf("--format %s: needs --out DIR", s.Format)
	}
	if p.png, err = s.pngScale(); err != nil {
		return p, err
	}
	if p.shard, err = parseShard(s.Shard, s.Shards, s.Env, s.Out); err != nil {
		return p, err
	}
	if s.Resume && s.Out == "" {
		return p, errors.New("--resume: it needs --out: a run without output keeps no checkpoint")
	}
	return p, nil
}

// stackFormats are the files a run's images can be written to, in the
// order parseFormats gives them: drr.npy, drr.mha, drr.tiff.
var stackFormats = []string{"npy", "mha", "tiff"}

// parseFormats reads --format: a comma-separated list of npy, mha and
// tiff (also tif), each at most once; "" is npy. The list comes back in
// stackFormats' order, so that two spellings of one choice are one.
func parseFormats(s string) ([]string, error) {
	if s == "" {
		return []string{"npy"}, nil
	}
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "tif" {
			f = "tiff"
		}
		switch {
		case f == "png":
			return nil, fmt.Errorf("--format %q: PNGs are --png (16-bit images for viewing); --format lists the float32 files: npy, mha, tiff", s)
		case !slices.Contains(stackFormats, f):
			return nil, fmt.Errorf("--format %q: %q is not a format: want a comma-separated list of npy, mha and tiff", s, f)
		case seen[f]:
			return nil, fmt.Errorf("--format %q: %s is given twice", s, f)
		}
		seen[f] = true
	}
	var out []string
	for _, f := range stackFormats {
		if seen[f] {
			out = append(out, f)
		}
	}
	return out, nil
}

// formatsMeta is the formats as a shard's metadata holds them: nil for
// drr.npy alone, as shards written before --format existed say.
func formatsMeta(f []string) []string {
	if slices.Equal(f, []string{"npy"}) {
		return nil
	}
	return f
}

// commonPixel is the poses' pixel size, (column, row) spacing in mm, when
// every pose has the same; else zero.
func commonPixel(poses []ops.Pose) [2]float64 {
	for _, p := range poses[1:] {
		if p.Pixel != poses[0].Pixel {
			return [2]float64{}
		}
	}
	return poses[0].Pixel
}

// pngScale checks PNGScale, Window and Level.
func (s DRRSpec) pngScale() (pngScale, error) {
	var sc pngScale
	switch s.PNGScale {
	case "", "image":
	case "global":
		sc.global = true
	default:
		return sc, fmt.Errorf("--png-scale %q: want image or global", s.PNGScale)
	}
	if (s.Window == nil) != (s.Level == nil) {
		return sc, errors.New("--window and --level: give both")
	}
	if s.Window != nil {
		w, l := *s.Window, *s.Level
		if !(w > 0) || math.IsInf(w, 0) || math.IsNaN(l) || math.IsInf(l, 0) {
			return sc, fmt.Errorf("--window %g --level %g: want a positive, finite window and a finite level", w, l)
		}
		if sc.global {
			return sc, errors.New("--window and --png-scale global: give one")
		}
		sc.window, sc.lo, sc.hi = true, float32(l-w/2), float32(l+w/2)
	}
	if (s.PNGScale != "" || s.Window != nil) && !s.PNG {
		return sc, errors.New("--png-scale, --window and --level: they are for --png")
	}
	return sc, nil
}

// pngScale is how a run's PNGs map line integrals to gray (DRRSpec's
// PNGScale, Window and Level).
type pngScale struct {
	global, window bool
	lo, hi         float32 // the window; with global, the run's range so far
}

// meta is the scale as a shard's metadata holds it.
func (sc pngScale) meta() (string, [2]float64) {
	switch {
	case sc.global:
		return "global", [2]float64{}
	case sc.window:
		return "window", [2]float64{float64(sc.lo), float64(sc.hi)}
	}
	return "", [2]float64{}
}

// pngScaleOf is the scale a shard's metadata holds.
func pngScaleOf(m shard.RangeMeta) pngScale {
	switch m.PNGScale {
	case "global":
		return pngScale{global: true}
	case "window":
		return pngScale{window: true, lo: float32(m.PNGWindow[0]), hi: float32(m.PNGWindow[1])}
	}
	return pngScale{}
}

// Validate checks what can be checked before any file is read.
func (s DRRSpec) Validate() error {
	_, err := s.parse()
	return err
}

// DRRTask is an opened DRR run.
type DRRTask struct {
	job    *drr.Job
	n      int // the job's poses (a shard's)
	rows   int // and their detector
	cols   int
	claim  *claim // the checkpoint's lock, and what it holds
	ckp    *checkpoint.File
	dir    string
	dirs   []string           // directories Open created for Out, outermost first
	npyOut *atomicfile.File   // a shard's archive
	npz    *npy.NPZWriter     // and its writer
	writer *npy.Writer        // and its images
	stacks stacks             // drr.npy, drr.mha, drr.tiff: the formats asked for
	pngs   []*atomicfile.File // written and closed, renamed on Commit
	scale  pngScale
	ranged bool // with a global scale: some image has set scale.lo and hi
	// inputs are the files the run reads (the volume's, the geometry),
	// which the removal of an earlier run's outputs leaves alone.
	inputs []fs.FileInfo
	warn   func(string)
}

// pngOf writes pose i's PNG as its image comes: scaled over the image's
// own range lo to hi, or over the window; with a global scale it only
// widens the run's range, and Commit writes the PNGs.
func (t *DRRTask) pngOf(i int, img []float32, lo, hi float32) error {
	switch {
	case t.scale.global:
		if !t.ranged || lo < t.scale.lo {
			t.scale.lo = lo
		}
		if !t.ranged || hi > t.scale.hi {
			t.scale.hi = hi
		}
		t.ranged = true
		return nil
	case t.scale.window:
		lo, hi = t.scale.lo, t.scale.hi
	}
	return t.writePNG(i, img, lo, hi, t.rows, t.cols)
}

// globalPNGs writes every pose's PNG over the run's range, reading the
// images back from the first of the stacks (drr.npy, drr.mha or
// drr.tiff: each holds them as contiguous float32 values), written whole
// and flushed.
func (t *DRRTask) globalPNGs() error {
	per := t.rows * t.cols
	src := t.stacks[0]
	b := make([]byte, 4*per)
	img := make([]float32, per)
	for i := range t.n {
		if _, err := src.f.ReadAt(b, src.off+int64(i)*int64(len(b))); err != nil {
			return fmt.Errorf("--png: %w", fileError("read back", filepath.Join(t.dir, src.name), err))
		}
		for k := range img {
			img[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
		}
		if err := t.writePNG(i, img, t.scale.lo, t.scale.hi, t.rows, t.cols); err != nil {
			return err
		}
	}
	return nil
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
	setup, err := s.Prepare(v, poses[0].Rows, poses[0].Cols)
	if err != nil {
		return nil, err
	}
	setup.Poses = poses
	if setup.Step > 0 {
		if err := drr.CheckSamples(v, poses, setup.Step, s.Step != nil); err != nil {
			return nil, err
		}
		if s.Step != nil {
			if w := drr.StepWarning(v, setup.Step); w != "" {
				s.warn(w)
			}
		}
	}
	t := &DRRTask{dir: s.Out, n: len(poses), rows: poses[0].Rows, cols: poses[0].Cols, warn: s.warn}
	frame, scale := p.frame, p.png
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	// A shard renders its poses and writes their images, with what they
	// depend on, to an archive; the merge writes drr.npy and the PNGs.
	if p.shard.sharded {
		fp := s.fingerprint(v, poses, setup, dev.Kind())
		setup.Poses, setup.First, setup.Total = poses[lo:hi], lo, len(poses)
		t.n = hi - lo
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
				return nil, fmt.Errorf("--out: %w", fileError("create", s.Out, err))
			}
			t.npz = npy.NewNPZWriter(t.npyOut)
			meta := shard.RangeMeta{Workload: shard.DRR, Items: len(poses), Lo: lo, Hi: hi, Index: p.shard.index, Count: p.shard.count,
				Fingerprint: fp, Rows: r, Cols: c, PNG: s.PNG, Formats: formatsMeta(p.formats)}
			meta.PNGScale, meta.PNGWindow = p.png.meta()
			if meta.Formats != nil {
				meta.Pixel = commonPixel(poses)
			}
			if err = shard.WriteRangeMeta(t.npz, meta); err != nil {
				return nil, fmt.Errorf("--out: %w", fileError("write", s.Out, err))
			}
			// The whole run's geometry.json, which the merge writes.
			if err = writeGeometry(t.npz.CreateRaw, poses, p.frame); err != nil {
				return nil, fmt.Errorf("--out: %w", fileError("write", s.Out, err))
			}
			if t.writer, err = t.npz.Create("drr", npy.Float32, []int{hi - lo, r, c}); err != nil {
				return nil, fmt.Errorf("--out: %w", fileError("write", s.Out, err))
			}
			setup.Out = namedWriter{t.writer, s.Out}
		}
		if t.job, err = drr.New(setup); err != nil {
			return nil, err
		}
		if withOutput {
			if err := t.resume(); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	if withOutput && s.Out != "" {
		t.inputs = existing(s.InputPaths())
		if t.dirs, err = atomicfile.MakeDirs(s.Out); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		rows, cols := poses[0].Rows, poses[0].Cols
		h := checkpoint.Header{Workload: shard.DRR, Fingerprint: s.fingerprint(v, poses, setup, dev.Kind()), Lo: 0, Hi: len(poses), Record: drrRecordBytes(rows, cols)}
		if t.claim, err = claimCheckpoint(filepath.Join(s.Out, "drr.npy"), h, s.Resume, len(poses), true, "poses", s.warn); err != nil {
			return nil, err
		}
		// What a killed run left is removed before the space is counted:
		// a resumed run needs the room its first run had, less the
		// records already in the checkpoint.
		atomicfile.Sweep(s.Out)
		size := engine.AddBytes(stacksSpace(len(p.formats), s.PNG, len(poses), rows, cols), checkpointSpace(len(poses)-t.claim.Saved(), h.Record))
		if err := atomicfile.CheckSpace(filepath.Join(s.Out, "drr.npy"), size); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		if err := t.createStacks(p.formats, stackfile.Stack{N: len(poses), Rows: rows, Cols: cols, Pixel: commonPixel(poses)}); err != nil {
			return nil, err
		}
		setup.Out = t.stacks
		if s.PNG {
			t.scale = scale
			setup.Image = t.pngOf
		}
		if err := t.createGeometry(poses, frame); err != nil {
			return nil, err
		}
	}
	if t.job, err = drr.New(setup); err != nil {
		return nil, err
	}
	if withOutput && s.Out != "" {
		if err := t.resume(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// resume writes the poses the claimed checkpoint holds, when resumed,
// and opens it for the poses to come.
func (t *DRRTask) resume() (err error) {
	img := make([]float32, t.rows*t.cols)
	restore := func(pose int, b []byte) error {
		for k := range img {
			img[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[8+4*k:]))
		}
		return t.job.Restore(pose, img, int(binary.LittleEndian.Uint64(b)))
	}
	if t.ckp, err = t.claim.open(t.n, restore); err != nil {
		return err
	}
	t.job.SetSaver(&drrSaver{ckpt: t.ckp, size: drrRecordBytes(t.rows, t.cols)})
	return nil
}

// drrRecordBytes is the size of a checkpoint record of a rows × cols
// image: the pose's count of rays that hit the volume, then its image.
func drrRecordBytes(rows, cols int) int { return 8 + 4*rows*cols }

// drrSaver appends the poses a DRR job finishes to its checkpoint, one
// record each (drrRecordBytes).
type drrSaver struct {
	ckpt *checkpoint.File
	size int      // a record's bytes
	buf  []byte   // the records of a batch, reused
	recs [][]byte // and each of them
}

// Save appends the records of poses first…first+len(hits)−1.
func (c *drrSaver) Save(first int, imgs []float32, hits []int) error {
	n, size := len(hits), c.size
	per := (size - 8) / 4
	if cap(c.buf) < n*size { // kept between batches: no garbage per batch
		c.buf, c.recs = make([]byte, n*size), make([][]byte, n)
	}
	recs := c.recs[:n]
	for r := range recs {
		b := binary.LittleEndian.AppendUint64(c.buf[r*size:r*size], uint64(hits[r]))
		for _, v := range imgs[r*per : (r+1)*per] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		recs[r] = b
	}
	return c.ckpt.Append(first, recs)
}

// StagingBytes is a batch of n records, encoded, then with their
// checksums.
func (c *drrSaver) StagingBytes(n int) int64 { return 2 * int64(n) * int64(c.size+4) }

// warn writes a warning line to s.Warn, if any.
func (s DRRSpec) warn(msg string) {
	if s.Warn != nil {
		fmt.Fprint(s.Warn, warnings.Line(msg))
	}
}

// fingerprint identifies what a shard's images depend on: the volume as
// rendered (its values after --hu or --mu, its grid and placement), every
// pose of the run, the method and step, the formulas with their
// parameters, the filters, the PNG choice and the kind of device, "cpu" or
// "cuda" (a GPU rounds otherwise than the CPU). Every option of drr.Config
// not tagged fingerprint:"-" changes it (TestDRRFingerprintCoversConfig).
func (s DRRSpec) fingerprint(v *volume.Volume, poses []ops.Pose, setup drr.Setup, device string) string {
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
	f.f64s(setup.Step)
	f.str(setup.Mu)
	if setup.Post != nil {
		f.str(setup.Post.F.Canonical())
	}
	if setup.Filter != nil {
		for _, st := range setup.Filter.Stages() {
			f.str("filter " + st)
		}
	}
	f.params(s.Params)
	f.str(fmt.Sprint(s.PNG))
	if sc, err := s.pngScale(); err == nil { // checked: parse ran first
		if name, w := sc.meta(); name != "" {
			f.str(name)
			f.f64s(w[0], w[1])
		}
	}
	f.str(device)
	return f.sum()
}

// loadVolume reads Volume, or makes the phantom, and applies the spec's
// spacing, origin and units.
func (s DRRSpec) loadVolume(p drrPlan) (*volume.Volume, error) {
	if s.Volume != "" {
		opt := volume.Options{Spacing: s.Spacing, Origin: s.Origin, Shape: p.shape, Dtype: s.RawDtype, XFastest: p.xFastest, Frame: p.frame, Warn: s.Warn, Series: s.Series}
		v, err := volume.Load(s.Volume, opt)
		if err != nil {
			return nil, fmt.Errorf("--volume: %w", err)
		}
		if s.HU {
			volume.ApplyHU(v, s.Water())
		}
		return v, nil
	}
	v := volume.Phantom(s.Size, 192, s.Water())
	if s.Spacing != nil {
		v.Spacing = *s.Spacing
	}
	if s.Origin != nil {
		v.Origin = *s.Origin
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
		poses, frame, err := ops.ReadGeometryFrame(f)
		if err != nil {
			return nil, fmt.Errorf("--geometry: %s: %w", s.Geometry, err)
		}
		if frame != "" && frame != string(p.frame) {
			return nil, fmt.Errorf("--geometry: %s: its poses are in the %s frame, --frame is %s: give --frame %s", s.Geometry, frame, p.frame, frame)
		}
		return poses, nil
	}
	c := v.Centre()
	if p.iso != nil {
		c = *p.iso
	}
	return ops.OrbitAbout(s.Orbit, c, p.axis, s.Start, s.SDD, s.SID, p.rows, p.cols, s.Pixel)
}

// writeGeometry writes the geometry.json of poses in frame (drr.Geometry)
// to a file that create makes.
func writeGeometry(create func(string) (io.Writer, error), poses []ops.Pose, frame volume.Frame) error {
	b, err := drr.Geometry(poses, string(frame))
	if err != nil {
		return err
	}
	w, err := create("geometry.json")
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// stacksSpace is the disk space of n images of rows×cols in as many
// stack files, and with png their PNGs (at most 2 bytes a pixel).
func stacksSpace(files int, png bool, n, rows, cols int) int64 {
	px := 4 * int64(files)
	if png {
		px += 2
	}
	return sysmem.Mul(int64(n), int64(rows), int64(cols), px)
}

// stackOut is one file of a run's images: drr.npy, drr.mha or drr.tiff.
type stackOut struct {
	name string
	f    *atomicfile.File
	w    interface {
		Write32([]float32) error
		Flush() error
	}
	off int64 // where its images start
}

// stacks are the files of a run's images, each receiving every image.
type stacks []stackOut

// Write32 writes images to every file.
func (s stacks) Write32(v []float32) error {
	for _, o := range s {
		if err := o.w.Write32(v); err != nil {
			return fmt.Errorf("--out: %w", fileError("write", o.f.Path, err))
		}
	}
	return nil
}

// createStacks creates DIR/drr.FORMAT for each of formats (parseFormats'
// names) as a temporary file, its header written, for the images of st.
func (t *DRRTask) createStacks(formats []string, st stackfile.Stack) error {
	for _, format := range formats {
		name := "drr." + format
		f, err := atomicfile.Create(filepath.Join(t.dir, name))
		if err != nil {
			return fmt.Errorf("--out: %w", fileError("create", filepath.Join(t.dir, name), err))
		}
		t.stacks = append(t.stacks, stackOut{name: name, f: f})
		o := &t.stacks[len(t.stacks)-1]
		switch format {
		case "npy":
			o.off = int64(len(npy.EncodeHeader(npy.Float32, []int{st.N, st.Rows, st.Cols})))
			o.w, err = npy.NewWriter(f, npy.Float32, []int{st.N, st.Rows, st.Cols})
		case "mha":
			var w *stackfile.Writer
			w, err = stackfile.NewMHA(f, st)
			o.w, o.off = w, int64(len(stackfile.MHAHeader(st)))
		case "tiff":
			var w *stackfile.Writer
			if w, err = stackfile.NewTIFF(f, st, stackfile.TIFFOptions{}); err == nil {
				o.w, o.off = w, w.DataOffset()
			}
		default:
			err = fmt.Errorf("no such format %q", format)
		}
		if err != nil {
			return fmt.Errorf("--out: %w", fileError("write", f.Path, err))
		}
	}
	return nil
}

// createGeometry writes DIR/geometry.json, the poses with their projection
// matrices, to a temporary file renamed with the images on Commit.
func (t *DRRTask) createGeometry(poses []ops.Pose, frame volume.Frame) error {
	b, err := drr.Geometry(poses, string(frame))
	if err != nil {
		return err
	}
	return t.createSide("geometry.json", b)
}

// createSide writes b to DIR/name, a temporary file renamed with the images
// on Commit.
func (t *DRRTask) createSide(name string, b []byte) error {
	f, err := atomicfile.Create(filepath.Join(t.dir, name))
	if err != nil {
		return fmt.Errorf("--out: %w", fileError("create", filepath.Join(t.dir, name), err))
	}
	t.pngs = append(t.pngs, f)
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("--out: %w", fileError("write", f.Path, err))
	}
	return nil
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
		y := math.Round(float64((v - lo) * scale))
		x := uint16(min(max(y, 0), 65535)) // a window clips; NaN is 0
		if math.IsNaN(y) {
			x = 0
		}
		g.Pix[2*k], g.Pix[2*k+1] = byte(x>>8), byte(x)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, g); err != nil {
		return fmt.Errorf("--png: %w", err)
	}
	path := filepath.Join(t.dir, pngName(i))
	f, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("--png: %w", fileError("create", path, err))
	}
	t.pngs = append(t.pngs, f)
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("--png: %w", fileError("write", path, err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--png: %w", fileError("write", path, err))
	}
	return nil
}

// namedWriter is a shard's images, written into the archive path through
// its temporary file; a failed write names path.
type namedWriter struct {
	w    drr.Writer
	path string
}

func (n namedWriter) Write32(v []float32) error {
	if err := n.w.Write32(v); err != nil {
		return fmt.Errorf("--out: %w", fileError("write", n.path, err))
	}
	return nil
}

// Job is the DRR job.
func (t *DRRTask) Job() engine.Job { return t.job }

// Result is the run's drr.Result.
func (t *DRRTask) Result() any { return t.job.Result() }

// Summary is the run's drr.Result.
func (t *DRRTask) Summary() drr.Result { return t.job.Result() }

// AllMissed reports whether every ray of the run missed the volume.
func (t *DRRTask) AllMissed() bool { return t.job.AllMissed() }

// GeometryWarnings are the faults of the run's geometry, a line each
// (drr.CheckGeometry).
func (t *DRRTask) GeometryWarnings() []string { return t.job.GeometryWarnings() }

// Missed is the line about the poses whose every ray misses the volume,
// "" when there are none (among GeometryWarnings too).
func (t *DRRTask) Missed() string { return t.job.Missed() }

// Blank is the line, after the run, when some rays cross the volume but
// every image is 0; "" else.
func (t *DRRTask) Blank() string { return t.job.Blank() }

// Commit flushes drr.npy and the other stack files (or closes a shard's
// archive) and renames them and the PNGs into place.
func (t *DRRTask) Commit() error {
	if t.npyOut == nil && t.stacks == nil {
		return nil
	}
	// The shard's archive, or the stacks: the first of them (drr.npy when
	// asked for) is renamed last.
	var files []*atomicfile.File
	if t.npz != nil {
		if err := t.npz.Close(); err != nil {
			return fmt.Errorf("--out: %w", fileError("write", t.npyOut.Path, err))
		}
		files = append(files, t.npyOut)
	}
	for _, o := range t.stacks {
		if err := o.w.Flush(); err != nil {
			return fmt.Errorf("--out: %w", fileError("write", o.f.Path, err))
		}
		files = append(files, o.f)
	}
	if t.scale.global && t.npz == nil {
		if err := t.globalPNGs(); err != nil {
			return err
		}
	}
	// The PNGs and the other files go first and drr.npy last: a run
	// killed in between has no drr.npy yet, and its checkpoint and
	// temporary files say so; the next run in the directory removes the
	// temporaries.
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("--out: %w", fileError("write", f.Path, err))
		}
	}
	written := map[string]bool{}
	for _, f := range append(t.pngs, files...) {
		written[filepath.Base(f.Path)] = true
	}
	for _, p := range t.pngs {
		if err := p.Rename(); err != nil {
			flag := "--out" // geometry.json
			if _, png := pngIndex(filepath.Base(p.Path)); png {
				flag = "--png"
			}
			return fmt.Errorf("%s: %w", flag, fileError("write", p.Path, err))
		}
	}
	for _, f := range append(files[1:], files[0]) {
		if err := f.Commit(); err != nil {
			return fmt.Errorf("--out: %w", fileError("write", f.Path, err))
		}
	}
	if t.npz == nil {
		// The run has succeeded: what it cannot remove is only said.
		removeStale(t.dir, written, t.inputs, t.warn)
	}
	atomicfile.KeepDirs(t.dirs)
	t.npyOut, t.stacks, t.dirs = nil, nil, nil
	err := removeCheckpoint(&t.ckp)
	t.claim.release()
	return err
}

// removeStale removes from dir the files named as a DRR run names its
// outputs (drr.npy, drr.mha, drr.tiff, drr_NNNN.png, geometry.json) that
// this run did not write (written: base names): an earlier run's in the
// same --out, with more poses or other formats, whose files would
// otherwise sit beside this run's as if they were of it. A file the run
// read (inputs) is never removed. It runs once the run's outputs are in
// place: a file it cannot remove is a warning, naming it.
func removeStale(dir string, written map[string]bool, inputs []fs.FileInfo, warn func(string)) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		warn(fmt.Sprintf("--out: an earlier run's files in %s were not looked for: %v", dir, err))
		return
	}
	for _, e := range entries {
		name := e.Name()
		if written[name] || !e.Type().IsRegular() || !drrOutputName(name) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && slices.ContainsFunc(inputs, func(in fs.FileInfo) bool { return os.SameFile(fi, in) }) {
			continue // an input of this run, however named
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			warn(fmt.Sprintf("--out: an earlier run's %s was not removed: %v", p, err))
		}
	}
}

// existing is the files of paths that exist, as os.Stat gives them.
func existing(paths []Path) []fs.FileInfo {
	var out []fs.FileInfo
	for _, p := range paths {
		if p.Path == "" {
			continue
		}
		if fi, err := os.Stat(p.Path); err == nil && fi.Mode().IsRegular() {
			out = append(out, fi)
		}
	}
	return out
}

// drrOutputName reports whether name is one a DRR run gives an output.
func drrOutputName(name string) bool {
	if name == "geometry.json" || slices.Contains(stackFormats, strings.TrimPrefix(name, "drr.")) {
		return true
	}
	_, ok := pngIndex(name)
	return ok
}

// pngName is the name of pose i's PNG.
func pngName(i int) string { return fmt.Sprintf("drr_%04d.png", i) }

// pngIndex is the pose of a PNG named as a DRR run names them,
// drr_NNNN.png (four digits or more).
func pngIndex(name string) (int, bool) {
	num, ok := strings.CutSuffix(strings.TrimPrefix(name, "drr_"), ".png")
	if !ok || len(num) < 4 || !strings.HasPrefix(name, "drr_") {
		return 0, false
	}
	i := 0
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		if i < 1<<30 {
			i = 10*i + int(c-'0')
		}
	}
	return i, true
}

// Close removes the outputs not committed, and the directories OpenDRR
// made for them when they are left empty.
func (t *DRRTask) Close() error {
	if t.npyOut != nil {
		t.npyOut.Abort()
		t.npyOut = nil
	}
	for _, o := range t.stacks {
		o.f.Abort() // a no-op on those renamed
	}
	t.stacks = nil
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
