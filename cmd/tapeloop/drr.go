package main

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

const catDRR = "DRR"

var drrFlags = []cli.Flag{
	&cli.StringFlag{Name: "volume", Category: catDRR, Usage: "the volume: .npy, .nii, .nii.gz, .mha, .mhd, or raw with --shape and --dtype (`FILE`)"},
	&cli.StringFlag{Name: "spacing", Category: catDRR, Usage: "voxel size `sx,sy,sz` in mm (default: the file's, or 1,1,1)"},
	&cli.StringFlag{Name: "origin", Category: catDRR, Usage: "corner of voxel (0,0,0) `ox,oy,oz` in mm (default: the file's, or 0,0,0)"},
	&cli.StringFlag{Name: "shape", Category: catDRR, Usage: "raw volumes: `X,Y,Z` (C order: the last axis varies fastest)"},
	&cli.StringFlag{Name: "dtype", Category: catDRR, Usage: "raw volumes: uint8, int8, uint16, int16, uint32, int32, float32 or float64, little endian"},
	&cli.BoolFlag{Name: "hu", Category: catDRR, Usage: "the volume is in Hounsfield units: μ = μ_water·max(0, 1 + HU/1000)"},
	&cli.Float64Flag{Name: "mu-water", Category: catDRR, Value: 0.02, Usage: "attenuation of water per mm, for --hu and the phantom"},
	&cli.IntFlag{Name: "size", Category: catDRR, Value: 128, Usage: "the built-in Shepp–Logan phantom's size, without --volume"},
	&cli.StringFlag{Name: "geometry", Category: catDRR, Usage: "poses from a JSON `FILE`: {\"poses\": [{\"source\", \"center\", \"u\", \"v\", \"rows\", \"cols\", \"pixel\"}, …]}"},
	&cli.IntFlag{Name: "orbit", Category: catDRR, Value: 36, Usage: "without --geometry: `P` poses over 360° about the z axis through the volume centre"},
	&cli.Float64Flag{Name: "sdd", Category: catDRR, Value: 1020, Usage: "orbit: source–detector distance, mm"},
	&cli.Float64Flag{Name: "sid", Category: catDRR, Value: 510, Usage: "orbit: source–isocentre distance, mm"},
	&cli.StringFlag{Name: "detector", Category: catDRR, Value: "200x200", Usage: "orbit: detector `RxC` pixels"},
	&cli.Float64Flag{Name: "pixel", Category: catDRR, Value: 2, Usage: "orbit: pixel size, mm"},
	&cli.StringFlag{Name: "method", Category: catDRR, Value: "siddon", Usage: "siddon (exact radiological path) or trilinear"},
	&cli.Float64Flag{Name: "step", Category: catDRR, Usage: "trilinear: sample spacing in mm on each pose's longest ray, closer on shorter ones (default half the smallest voxel size)"},
	&cli.StringFlag{Name: "out", Category: catDRR, Usage: "write drr.npy (P, R, C) float32 line integrals into `DIR`"},
	&cli.BoolFlag{Name: "png", Category: catDRR, Usage: "with --out: also one 16-bit PNG per pose, drr_0000.png …"},
}

var drrCommand = &cli.Command{
	Name:  "drr",
	Usage: "render digitally reconstructed radiographs over many poses (seed 000)",
	Description: `Casts a ray from the source to every detector pixel centre through the volume
and integrates it: --method siddon (the exact radiological path: intersection
length × value, summed over voxels) or trilinear (samples at the same
fractions of every ray of a pose, --step mm apart on its longest ray). All
poses go through one compiled graph in batches planned under --mem-limit.
Without --volume it renders the 3-D Shepp–Logan phantom.`,
	Flags:  append(append([]cli.Flag{}, drrFlags...), withoutDtype(engineFlags)...),
	Action: runDRR,
}

// withoutDtype drops the engine's --dtype: a DRR computes float32 images,
// and its own --dtype names a raw volume's element type.
func withoutDtype(flags []cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		if f != dtypeFlag {
			out = append(out, f)
		}
	}
	return out
}

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

// drrSetup is a DRR job with its output files.
type drrSetup struct {
	job    *graphs.DRR
	dir    string
	npyOut *atomicfile.File
	writer *npy.Writer
	pngs   []*atomicfile.File // written and closed, renamed on success
}

func (s *drrSetup) close() {
	if s.npyOut != nil {
		s.npyOut.Abort()
	}
	for _, p := range s.pngs {
		p.Abort()
	}
}

func loadVolume(c *cli.Context) (*cpukern.Volume, error) {
	sp, err := parseTriple("spacing", c.String("spacing"))
	if err != nil {
		return nil, err
	}
	or, err := parseTriple("origin", c.String("origin"))
	if err != nil {
		return nil, err
	}
	muWater := c.Float64("mu-water")
	if !(muWater > 0) {
		return nil, fmt.Errorf("--mu-water %g: must be positive", muWater)
	}
	var v *cpukern.Volume
	if path := c.String("volume"); path != "" {
		opt := volume.Options{Spacing: sp, Origin: or, Dtype: c.String("dtype"), Warn: os.Stderr}
		if s := c.String("shape"); s != "" {
			t, err := parseTriple("shape", s)
			if err != nil {
				return nil, err
			}
			for a := range 3 {
				opt.Shape[a] = int(t[a])
				if float64(opt.Shape[a]) != t[a] || opt.Shape[a] < 1 {
					return nil, fmt.Errorf("--shape %q: want three positive integers", s)
				}
			}
		}
		if v, err = volume.Load(path, opt); err != nil {
			return nil, fmt.Errorf("--volume: %w", err)
		}
		if c.Bool("hu") {
			volume.ApplyHU(v, muWater)
		}
		return v, nil
	}
	n := c.Int("size")
	if n < 2 || n > 1024 {
		return nil, fmt.Errorf("--size %d: want 2 to 1024", n)
	}
	v = volume.Phantom(n, 192, muWater)
	if sp != nil {
		v.Spacing = *sp
	}
	if or != nil {
		v.Origin = *or
	}
	if err := volume.Check(v); err != nil {
		return nil, err
	}
	return v, nil
}

func loadPoses(c *cli.Context, v *cpukern.Volume) ([]graphs.Pose, error) {
	if path := c.String("geometry"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--geometry: %w", err)
		}
		defer f.Close()
		p, err := graphs.ReadGeometry(f)
		if err != nil {
			return nil, fmt.Errorf("--geometry: %s: %w", path, err)
		}
		return p, nil
	}
	var rows, cols int
	if _, err := fmt.Sscanf(c.String("detector"), "%dx%d", &rows, &cols); err != nil || rows < 1 || cols < 1 ||
		fmt.Sprintf("%dx%d", rows, cols) != c.String("detector") {
		return nil, fmt.Errorf("--detector %q: want RxC with R, C ≥ 1, e.g. 200x200", c.String("detector"))
	}
	var centre [3]float64
	for a := range 3 {
		centre[a] = v.Origin[a] + float64(v.N[a])*v.Spacing[a]/2
	}
	return graphs.Orbit(c.Int("orbit"), centre, c.Float64("sdd"), c.Float64("sid"), rows, cols, c.Float64("pixel"))
}

func setupDRR(c *cli.Context, withOutput bool, dev ops.Device) (_ *drrSetup, err error) {
	v, err := loadVolume(c)
	if err != nil {
		return nil, err
	}
	poses, err := loadPoses(c, v)
	if err != nil {
		return nil, err
	}
	step := 0.0
	switch c.String("method") {
	case "siddon":
		if c.IsSet("step") {
			return nil, fmt.Errorf("--step: only --method trilinear samples")
		}
	case "trilinear":
		step = 0.5 * min(v.Spacing[0], v.Spacing[1], v.Spacing[2])
		if c.IsSet("step") {
			step = c.Float64("step")
			if !(step > 0) || math.IsInf(step, 0) {
				return nil, fmt.Errorf("--step %g: must be positive", step)
			}
		}
	default:
		return nil, fmt.Errorf("--method %q: want siddon or trilinear", c.String("method"))
	}
	s := &drrSetup{dir: c.String("out")}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if c.Bool("png") && s.dir == "" {
		return nil, fmt.Errorf("--png: needs --out DIR")
	}
	cfg := graphs.DRRConfig{Vol: v, Poses: poses, Step: step, Device: dev}
	if withOutput && s.dir != "" {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		if s.npyOut, err = atomicfile.Create(filepath.Join(s.dir, "drr.npy")); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		p := poses[0]
		if s.writer, err = npy.NewWriter(s.npyOut, npy.Float32, []int{len(poses), p.Rows, p.Cols}); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		cfg.Out = s.writer
		if c.Bool("png") {
			cfg.Image = func(i int, img []float32) error { return s.writePNG(i, img, p.Rows, p.Cols) }
		}
	}
	if s.job, err = graphs.NewDRR(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// writePNG writes pose i's image, its line integrals scaled to [0, 65535],
// to a temporary file renamed with the others when the run succeeds.
func (s *drrSetup) writePNG(i int, img []float32, rows, cols int) error {
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, v := range img {
		lo, hi = min(lo, v), max(hi, v)
	}
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
	f, err := atomicfile.Create(filepath.Join(s.dir, fmt.Sprintf("drr_%04d.png", i)))
	if err != nil {
		return fmt.Errorf("--png: %w", err)
	}
	s.pngs = append(s.pngs, f)
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("--png: %w", err)
	}
	return f.Close()
}

func (s *drrSetup) commit() error {
	if s.npyOut == nil {
		return nil
	}
	if err := s.writer.Flush(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := s.npyOut.Commit(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, p := range s.pngs {
		if err := p.Rename(); err != nil {
			return fmt.Errorf("--png: %w", err)
		}
	}
	return nil
}

func runDRR(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("drr: unexpected argument %q", c.Args().First())
	}
	e, err := legacyConfig(c)
	if err != nil {
		return err
	}
	s, err := setupDRR(c, true, e.dev)
	if err != nil {
		return err
	}
	defer s.close()
	if _, err := runJob(e, s.job, func() any { return s.job.Result() }); err != nil {
		return err
	}
	if s.job.AllMissed() {
		fmt.Fprintln(os.Stderr, "tapeloop: warning: every ray missed the volume: check the geometry against the volume's origin and spacing")
	}
	if err := s.commit(); err != nil {
		return err
	}
	r := s.job.Result()
	fmt.Fprintf(os.Stdout, "drr: %d poses of %dx%d, %s: sum of line integrals %.9g, max %.6g\n", r.Poses, r.Rows, r.Cols, r.Method, r.Sum, r.Max)
	return nil
}
