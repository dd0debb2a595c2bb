package drr

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// DefaultMuWater is the attenuation of water per mm that a nil
// Config.MuWater stands for.
const DefaultMuWater = 0.02

// Config is what a user sets for a DRR: where the volume's voxels lie,
// what their values mean, and how rays are integrated. The volume, the
// detector and the poses are the run's data, not options. The zero value
// is not valid (Method must be named); DefaultConfig holds the defaults.
//
// Each field's flag tag names its command-line flag and its json tag its
// key in the C ABI's JSON config, which is its Python keyword; its help
// tag is the flag's help (arg: the value's name in it), its default the
// value DefaultConfig gives it. A field
// tagged fingerprint:"-" does not change the images (it only makes a
// warning an error), so shards and checkpoints need not record it.
type Config struct {
	// Spacing is the voxel size in mm along the volume's three index
	// axes, overriding the volume's own; nil keeps the volume's: a NIfTI,
	// MetaImage or DICOM header's, the phantom's, and 1 mm for an .npy or
	// raw file and for an array given in process (so that, for an array,
	// Spacing is simply its voxel size). The command line writes it
	// sx,sy,sz.
	Spacing *[3]float64 `flag:"spacing" json:"spacing" help:"voxel size sx,sy,sz in mm (default: the file's, or 1,1,1)" arg:"sx,sy,sz"`
	// Origin is the centre of voxel (0, 0, 0) in world mm, in Frame,
	// overriding the volume's own; nil keeps the volume's (a header's, or
	// 0,0,0 for an .npy or raw file and for an array given in process).
	// The command line writes it ox,oy,oz.
	Origin *[3]float64 `flag:"origin" json:"origin" help:"centre of voxel (0,0,0) ox,oy,oz in mm, in --frame, as NIfTI, MetaImage and DICOM define it (from a corner: corner + spacing/2; default: the file's, or 0,0,0)" arg:"ox,oy,oz"`
	// Frame is the world frame of the geometry (the poses, the orbit's
	// centre, Origin): "lps", patient LPS mm as DICOM, ITK and plastimatch
	// use ("" is the same), or "ras", nibabel's RAS mm. A NIfTI or
	// MetaImage volume is converted into it from its header; an .npy or
	// raw file, the phantom and an array given in process have no frame of
	// their own: their index axes run along its x, y and z, placed by
	// Spacing, Origin (and, in process, the array's direction) as given.
	Frame string `flag:"frame" json:"frame" help:"world frame of the geometry, orbit centre and --origin: lps (patient LPS mm, as DICOM, ITK, plastimatch) or ras (nibabel's RAS mm)"`
	// HU says the volume's values are Hounsfield units, converted to
	// attenuation per mm as μ = MuWater·max(0, 1 + HU/1000).
	HU bool `flag:"hu" json:"hu" help:"the volume is in Hounsfield units: μ = μ_water·max(0, 1 + HU/1000)"`
	// MuWater is the attenuation of water per mm, for HU and the phantom;
	// nil: DefaultMuWater.
	MuWater *float64 `flag:"mu-water" json:"mu_water" help:"attenuation of water per mm, for --hu and the phantom"`
	// Mu is the user's formula over a voxel's value h giving its
	// attenuation per mm, applied once to the volume before rendering
	// (on the CPU, whatever the device), e.g.
	// "where(h < -900, 0, 0.02*(1+h/1000))" (instead of HU); "": none.
	Mu string `flag:"mu" json:"mu" help:"your own attenuation per mm of a voxel's value h, applied once before rendering, e.g. 'where(h < -900, 0, 0.02*(1+h/1000))' (see docs/formulas.md)"`
	// Post is the user's formula over a pixel's line integral p, applied
	// to every image, e.g. "exp(-p)"; "": none. A reduction in Mu or Post
	// (max(h), mean(p)) reduces over the whole volume or image.
	Post string `flag:"post" json:"post" help:"your own formula applied to every pixel's line integral p, e.g. 'exp(-p)' (intensity) or '1-exp(-p)'"`
	// Filter is the image filters applied to every image after Post (to
	// the line integrals without it), in order, each a separable kernel
	// over the detector's pixels with its edges extended by reflection
	// (or the nearest pixel): "gauss:sigma_mm=0.8" (σ in mm on the
	// detector, in pixels along each axis by the poses' pixel size;
	// sigma_px in pixels; cut at truncate=4 σ), "box:3", "deriv:x" (the
	// central difference per mm along a row; y down a column),
	// "sobel:y" (the same, smoothed [1 2 1]/4 across). See FilterHelp.
	Filter []string `flag:"filter" json:"filter"`
	// Params holds the formulas' parameters by name (--param s=2.5).
	Params map[string]float64 `flag:"param" json:"params"`
	// FailOnNonFinite makes a NaN or infinite value of a formula an error
	// (else they are counted and reported).
	FailOnNonFinite bool `flag:"fail-on-nonfinite" json:"fail_on_nonfinite" fingerprint:"-"`
	// Method is "siddon" (the exact radiological path: intersection
	// length × value, summed over voxels) or "trilinear" (samples at the
	// same fractions of every ray of a pose).
	Method string `flag:"method" json:"method" help:"siddon (exact radiological path) or trilinear"`
	// Step is trilinear's sample spacing in mm on each pose's longest ray,
	// closer on shorter ones; nil: half the smallest voxel size. Siddon
	// takes none.
	Step *float64 `flag:"step" json:"step" help:"trilinear: sample spacing in mm on each pose's longest ray, closer on shorter ones (default half the smallest voxel size)"`
	// Strict makes a fault of the geometry an error: a source inside the
	// volume, a detector reaching into it, the volume behind the source,
	// or a pose whose every ray misses it; else each kind is a warning.
	Strict bool `flag:"strict" json:"strict" fingerprint:"-" help:"make a fault of the geometry an error: a source inside the volume, a detector reaching into it, the volume behind the source, a pose whose every ray misses it (else a warning each)"`
}

// DefaultConfig is a DRR by Siddon's method of a volume as it is given,
// in the LPS frame.
func DefaultConfig() Config {
	return Config{Frame: "lps", Method: "siddon"}
}

// Water is MuWater, or DefaultMuWater when it is nil.
func (c Config) Water() float64 {
	if c.MuWater == nil {
		return DefaultMuWater
	}
	return *c.MuWater
}

// plan is a Config's text parsed.
type plan struct {
	mu, post  *formula.Formula
	filter    []filterStage
	trilinear bool
}

// Validate checks c without any volume: the placement's numbers, the
// frame, the units, the formulas with their parameters, and the method
// with its step. Errors name the options as the command line does.
func (c Config) Validate() error {
	_, err := c.parse()
	return err
}

func (c Config) parse() (p plan, err error) {
	for _, t := range []struct {
		name string
		v    *[3]float64
	}{{"spacing", c.Spacing}, {"origin", c.Origin}} {
		if t.v == nil {
			continue
		}
		for _, x := range t.v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return p, fmt.Errorf("--%s %g,%g,%g: %g is not a finite number", t.name, t.v[0], t.v[1], t.v[2], x)
			}
		}
	}
	if _, err := volume.ParseFrame(c.Frame); err != nil {
		return p, err
	}
	if w := c.Water(); !(w > 0) || math.IsInf(w, 0) {
		return p, fmt.Errorf("--mu-water %g: must be positive and finite", w)
	}
	if c.Mu != "" && c.HU {
		return p, errors.New("--mu and --hu: give one (--mu maps the volume's values to attenuation itself)")
	}
	fs, err := option.ParseFormulas(c.Params,
		option.Formula{Flag: "--mu", Src: c.Mu, Vars: ops.MuVars},
		option.Formula{Flag: "--post", Src: c.Post, Vars: ops.PostVars})
	if err != nil {
		return p, err
	}
	p.mu, p.post = fs[0], fs[1]
	if p.mu == nil && p.post == nil && c.FailOnNonFinite {
		return p, errors.New("--fail-on-nonfinite: it is for --mu or --post, and neither is given")
	}
	for _, src := range c.Filter {
		f, err := parseFilter(src)
		if err != nil {
			return p, err
		}
		p.filter = append(p.filter, f)
	}
	switch c.Method {
	case "siddon":
		if c.Step != nil {
			return p, fmt.Errorf("--step: only --method trilinear samples")
		}
	case "trilinear":
		p.trilinear = true
		if c.Step != nil && (!(*c.Step > 0) || math.IsInf(*c.Step, 0)) {
			return p, fmt.Errorf("--step %g: must be positive", *c.Step)
		}
	default:
		return p, fmt.Errorf("--method %q: want siddon or trilinear", c.Method)
	}
	return p, nil
}

// Prepare makes the Setup that renders v under c onto rows×cols images.
// v is placed and in its final units already (Spacing, Origin and HU
// applied by the caller, who read or made it); Prepare maps its values
// through Mu in place (v holds attenuation after it), compiles Post for
// rows×cols images, makes the filters' kernels (for the poses' pixel
// size at each run) and sets the trilinear step. The Setup has no poses
// and no hooks yet.
func (c Config) Prepare(v *volume.Volume, rows, cols int) (Setup, error) {
	p, err := c.parse()
	if err != nil {
		return Setup{}, err
	}
	s := Setup{Vol: v, FailOnNonFinite: c.FailOnNonFinite, Strict: c.Strict}
	if p.mu != nil {
		mu, err := ops.NewMapFormula(p.mu, len(v.V))
		if err != nil {
			return Setup{}, err
		}
		mu.Apply32(v.V, v.V)
		if n := mu.NonFinite(); n > 0 {
			return Setup{}, fmt.Errorf("--mu %q: gave %d non-finite attenuations (NaN or ±Inf); a volume must be finite", p.mu, n)
		}
		s.Mu = p.mu.Canonical()
	}
	if p.post != nil {
		if s.Post, err = ops.NewMapFormula(p.post, rows*cols); err != nil {
			return Setup{}, err
		}
	}
	if len(p.filter) > 0 {
		if s.Filter, err = newFilter(p.filter); err != nil {
			return Setup{}, err
		}
	}
	if p.trilinear {
		s.Step = DefaultStep(v)
		if c.Step != nil {
			s.Step = *c.Step
		}
	}
	return s, nil
}

// ParseTriple reads "x,y,z", as the command line writes Spacing and
// Origin, into three finite numbers; "" is nil. name is the flag's, for
// the error.
func ParseTriple(name, s string) (*[3]float64, error) {
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
