package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/warnings"
)

const catDRR = "DRR"

var drrDefaults = filejob.DefaultDRRSpec()

var drrFlags = []cli.Flag{
	&cli.StringFlag{Name: "volume", TakesFile: true, Category: catDRR, Usage: "the volume: .npy, .nii, .nii.gz, .mha, .mhd, a DICOM series (its directory or one of its files), or raw with --shape and --dtype (`FILE`)"},
	configFlag(&cli.StringFlag{Category: catDRR}, drrDefaults.Config, "spacing"),
	configFlag(&cli.StringFlag{Category: catDRR}, drrDefaults.Config, "origin"),
	configFlag(&cli.StringFlag{Category: catDRR}, drrDefaults.Config, "frame"),
	&cli.StringFlag{Name: "shape", Category: catDRR, Usage: "raw volumes: `X,Y,Z`"},
	&cli.StringFlag{Name: "order", Category: catDRR, Usage: "raw volumes: the voxels' order in the file, zyx (C order, z fastest, as NumPy writes; the default) or xyz (x fastest, as Fortran, MATLAB, InVesalius' matrix.dat and many scanners' exports)"},
	&cli.StringFlag{Name: "dtype", Category: catDRR, Usage: "raw volumes: uint8, int8, uint16, int16, uint32, int32, float32 or float64, little endian"},
	&cli.StringFlag{Name: "series", Category: catDRR, Usage: "DICOM: the SeriesInstanceUID to read when the directory holds several (`UID`)"},
	configFlag(&cli.BoolFlag{Category: catDRR}, drrDefaults.Config, "hu"),
	configFlag(&cli.StringFlag{Category: catDRR}, drrDefaults.Config, "mu"),
	configFlag(&cli.StringFlag{Category: catDRR}, drrDefaults.Config, "post"),
	&cli.StringSliceFlag{Name: "filter", Category: catDRR, Usage: "filter every image by `STAGE` after --post (the line integrals without it), separable, edges reflected: " +
		drr.FilterHelp + "; e.g. gauss:sigma_mm=0.8 (σ in mm on the detector); repeat for stages in order"},
	paramFlag,
	failNonFiniteFlag,
	configFlag(&cli.Float64Flag{Category: catDRR, Value: drr.DefaultMuWater}, drrDefaults.Config, "mu-water"),
	&cli.IntFlag{Name: "size", Category: catDRR, Value: drrDefaults.Size, Usage: "the built-in Shepp–Logan phantom's size, without --volume"},
	&cli.StringFlag{Name: "geometry", TakesFile: true, Category: catDRR, Usage: "poses from a JSON `FILE`: {\"poses\": [{\"source\", \"center\", \"u\", \"v\", \"rows\", \"cols\", \"pixel\"}, …]}"},
	&cli.IntFlag{Name: "orbit", Category: catDRR, Value: drrDefaults.Orbit, Usage: "without --geometry: `P` poses over 360° about the z axis through the volume centre (or --axis through --isocenter, from --start)"},
	&cli.StringFlag{Name: "isocenter", Category: catDRR, Usage: "orbit: the point it turns about, `x,y,z` mm in --frame (default: the volume's centre)"},
	&cli.Float64Flag{Name: "start", Category: catDRR, Usage: "orbit: the first pose's angle, degrees (about z, 0 puts the source on +x of the isocentre, 90 on +y)"},
	&cli.StringFlag{Name: "axis", Category: catDRR, Value: "z", Usage: "orbit: the axis it turns about: x, y, z or a vector `ax,ay,az`"},
	&cli.Float64Flag{Name: "sdd", Category: catDRR, Value: drrDefaults.SDD, Usage: "orbit: source–detector distance, mm (radiography's SID, source-to-image)"},
	&cli.Float64Flag{Name: "sid", Aliases: []string{"sad"}, Category: catDRR, Value: drrDefaults.SID, Usage: "orbit: source–isocentre distance, mm (SAD, source-to-axis; not radiography's SID, source-to-image, which is --sdd)"},
	configFlag(&cli.BoolFlag{Category: catDRR}, drrDefaults.Config, "strict"),
	&cli.StringFlag{Name: "detector", Category: catDRR, Value: drrDefaults.Detector, Usage: "orbit: detector `RxC` pixels"},
	&cli.Float64Flag{Name: "pixel", Category: catDRR, Value: drrDefaults.Pixel, Usage: "orbit: pixel size, mm"},
	configFlag(&cli.StringFlag{Category: catDRR}, drrDefaults.Config, "method"),
	configFlag(&cli.Float64Flag{Category: catDRR}, drrDefaults.Config, "step"),
	&cli.StringFlag{Name: "out", TakesFile: true, Category: catDRR, Usage: "write drr.npy (P, R, C) float32 line integrals (or the files --format names) and geometry.json into `DIR` (a shard: to FILE.npz)"},
	&cli.StringFlag{Name: "format", Category: catDRR, Value: "npy", Usage: "with --out: the files of the float32 images, a comma-separated `LIST` of npy (drr.npy, (P, R, C) for NumPy), mha (drr.mha, a MetaImage of C×R×P for ITK, SimpleITK, 3D Slicer) and tiff (drr.tiff, one 32-bit float page per pose for ImageJ/Fiji, tifffile)"},
	&cli.BoolFlag{Name: "png", Category: catDRR, Usage: "with --out: also one 16-bit PNG per pose, drr_0000.png … (shards: written by tapeloop merge)"},
	&cli.StringFlag{Name: "png-scale", Category: catDRR, Usage: "with --png: image (each image from its own smallest to largest value; the default) or global (every image over the run's range)"},
	&cli.Float64Flag{Name: "window", Category: catDRR, Usage: "with --png and --level: map line integrals from level − W/2 to level + W/2 to black to white, clipping the rest (`W`)"},
	&cli.Float64Flag{Name: "level", Category: catDRR, Usage: "with --png and --window: the line integral at mid-gray (`L`)"},
	&cli.StringFlag{Name: "shard", Category: catDRR, Usage: "render only shard `i/n` of the poses (0 ≤ i < n, a contiguous range) into --out FILE.npz (merge with tapeloop merge)"},
	&cli.IntFlag{Name: "shards", Category: catDRR, Usage: "split into `n` shards, this job's index from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX"},
	resumeFlag,
}

var drrCommand = &cli.Command{
	Name:  "drr",
	Usage: "render digitally reconstructed radiographs over many poses",
	Description: `Casts a ray from the source to every detector pixel centre through the volume
and integrates it: --method siddon (the exact radiological path: intersection
length × value, summed over voxels) or trilinear (samples at the same
fractions of every ray of a pose, --step mm apart on its longest ray). All
poses go through one compiled graph in batches planned under --mem-limit.
Without --volume it renders the 3-D Shepp–Logan phantom. Each image is the
line integrals, then --post's formula of them, then each --filter in order
(e.g. --post 'exp(-p)' --filter gauss:sigma_mm=0.8 blurs the intensity image).

Geometry is in world mm, patient LPS by default (DICOM, ITK, plastimatch) or
nibabel's RAS with --frame ras. NIfTI and MetaImage volumes are placed by
their headers (origin, spacing and direction cosines; the origin is the centre
of voxel 0); .npy and raw volumes by --origin and --spacing, their index axes
along x, y and z.

--shard i/n (or --shards n under a SLURM array or a Kubernetes Indexed Job)
renders a contiguous range of the poses into a shard file; tapeloop merge
assembles the shards into the drr.npy (and PNGs) one run writes, byte for
byte.

--format npy,mha,tiff writes the images for other tools too: drr.mha, a
MetaImage (ITK, SimpleITK, 3D Slicer, plastimatch), and drr.tiff, a stack of
32-bit float pages (ImageJ/Fiji, tifffile). Either holds each image in its
own detector frame (pixel spacing in mm, pixel (0, 0) at the origin, the
pose number along the third axis); geometry.json places every pose in the
world.`,
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

// drrSpec reads the DRR flags: the computation's into the spec's
// drr.Config, the data's and the files' into the spec.
func drrSpec(c *cli.Context) (filejob.DRRSpec, error) {
	s := filejob.DRRSpec{
		Volume: c.String("volume"), RawShape: c.String("shape"), RawDtype: c.String("dtype"), RawOrder: c.String("order"), Series: c.String("series"),
		Size: c.Int("size"), Geometry: c.String("geometry"), Orbit: c.Int("orbit"), Isocenter: c.String("isocenter"), Start: c.Float64("start"), Axis: c.String("axis"), SDD: c.Float64("sdd"), SID: c.Float64("sid"),
		Detector: c.String("detector"), Pixel: c.Float64("pixel"),
		Out: c.String("out"), PNG: c.Bool("png"), PNGScale: c.String("png-scale"),
		Window: floatIfSet(c, "window"), Level: floatIfSet(c, "level"), Warn: os.Stderr, Shards: intIfSet(c, "shards"),
		Resume: c.Bool(resumeFlag.Name),
	}
	readConfig(c, &s.Config, "mu-water")
	// Read here: μ_water, set from its flag's default when not given;
	// --param's map; --spacing's and --origin's triples.
	water := c.Float64("mu-water")
	s.MuWater = &water
	if c.IsSet("shard") {
		v := c.String("shard")
		s.Shard = &v
	}
	if c.IsSet("format") { // not given: drr.npy, and no --out needed
		if s.Format = c.String("format"); strings.TrimSpace(s.Format) == "" {
			return s, errors.New("--format: empty: want a comma-separated list of npy, mha and tiff")
		}
	}
	var err error
	if s.Params, err = params(c); err != nil {
		return s, err
	}
	if s.Spacing, err = drr.ParseTriple("spacing", c.String("spacing")); err != nil {
		return s, err
	}
	s.Origin, err = drr.ParseTriple("origin", c.String("origin"))
	return s, err
}

func runDRR(c *cli.Context) error {
	spec, err := drrSpec(c)
	if err != nil {
		return err
	}
	e, dev, t, err := openTask(c, spec, filejob.OpenDRR)
	if err != nil {
		return err
	}
	defer t.Close()
	for _, w := range t.GeometryWarnings() {
		fmt.Fprint(os.Stderr, warnings.Line(w))
	}
	var r drr.Result
	if _, err := runTask(c.Context, e, dev, t, func() {
		r = t.Summary()
		what := "line integrals"
		if r.Post != "" {
			what = "post(p) = " + r.Post
		}
		if r.Filter != "" {
			what += " filtered by " + r.Filter
		}
		poses := fmt.Sprintf("%d poses of %dx%d", r.Poses, r.Rows, r.Cols)
		if r.Range != [3]int{} {
			poses = fmt.Sprintf("poses [%d, %d) of %d, %dx%d", r.Range[0], r.Range[1], r.Range[2], r.Rows, r.Cols)
		}
		fmt.Fprintf(stdout, "drr: %s, %s: sum of %s %.9g, max %.6g\n", poses, r.Method, what, r.Sum, r.Max)
	}); err != nil {
		return t.Unfinished(err)
	}
	if m := t.Blank(); m != "" {
		fmt.Fprint(os.Stderr, warnings.Line(m))
	}
	warnNonFinite(e, "--post", r.NonFinite)
	return nil
}
