package drr

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/ops"
)

// FilterHelp lists the --filter stages, for the flag's help and errors.
const FilterHelp = "gauss:sigma_mm=S (or sigma_px=S; truncate=T, default 4), box:N, deriv:x|y, sobel:x|y; each may add ,mode=reflect|nearest"

// DefaultTruncate is where a Gaussian stage is cut, in σ, as
// scipy.ndimage.gaussian_filter's truncate=4.0.
const DefaultTruncate = 4.0

// filterStage is one --filter, parsed: a separable kernel over the
// detector's pixels.
type filterStage struct {
	kind     string  // gauss, box, deriv or sobel
	sigma    float64 // gauss: σ in mm on the detector (mm) or in pixels
	mm       bool
	truncate float64
	size     int  // box: pixels a side
	axis     byte // deriv, sobel: 'x' (along a row, across the columns) or 'y' (down a column)
	mode     ops.FilterMode
}

// parseFilter reads a --filter stage, KIND:ARG,KEY=VALUE,…; errors name
// the flag and the stage as given.
func parseFilter(src string) (filterStage, error) {
	bad := func(format string, a ...any) (filterStage, error) {
		return filterStage{}, fmt.Errorf("--filter %q: %s", src, fmt.Sprintf(format, a...))
	}
	kind, args, _ := strings.Cut(strings.TrimSpace(src), ":")
	f := filterStage{kind: strings.TrimSpace(kind), truncate: DefaultTruncate, mode: ops.FilterReflect}
	takes := map[string]string{"gauss": "sigma_mm or sigma_px, truncate and mode", "box": "a size N and mode",
		"deriv": "an axis, x or y, and mode", "sobel": "an axis, x or y, and mode"}[f.kind]
	if takes == "" {
		return bad("unknown filter %q; want %s", f.kind, FilterHelp)
	}
	var sigmas int
	given := map[string]bool{}
	for i, a := range strings.Split(args, ",") {
		a = strings.TrimSpace(a)
		if a == "" && args == "" {
			break
		}
		key, val, isKV := strings.Cut(a, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !isKV { // the stage's bare first argument: box's size, deriv's axis
			switch {
			case i == 0 && f.kind == "box":
				key, val = "size", a
			case i == 0 && (f.kind == "deriv" || f.kind == "sobel"):
				key, val = "axis", a
			default:
				return bad("%q is not a setting KEY=VALUE; %s takes %s", a, f.kind, takes)
			}
		}
		if given[key] && key != "sigma_mm" && key != "sigma_px" { // two sigmas say so below
			return bad("%s given twice", key)
		}
		given[key] = true
		number := func() (float64, error) {
			x, err := strconv.ParseFloat(val, 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				return 0, fmt.Errorf("--filter %q: %s=%s: want a positive, finite number", src, key, val)
			}
			return x, nil
		}
		var err error
		switch {
		case key == "mode":
			switch val {
			case "reflect":
				f.mode = ops.FilterReflect
			case "nearest":
				f.mode = ops.FilterNearest
			default:
				return bad("mode=%s: want reflect (half-sample symmetric, scipy.ndimage's default) or nearest (the edge pixel repeated)", val)
			}
		case f.kind == "gauss" && (key == "sigma_mm" || key == "sigma_px"):
			sigmas++
			f.mm = key == "sigma_mm"
			f.sigma, err = number()
		case f.kind == "gauss" && key == "truncate":
			f.truncate, err = number()
		case f.kind == "box" && key == "size":
			n, e := strconv.Atoi(val)
			if e != nil || n < 1 || n > ops.MaxFilterTaps {
				return bad("size %s: want a whole number of pixels from 1 to %d", val, ops.MaxFilterTaps)
			}
			f.size = n
		case (f.kind == "deriv" || f.kind == "sobel") && key == "axis":
			if val != "x" && val != "y" {
				return bad("axis %q: want x (along a row, across the columns) or y (down a column)", val)
			}
			f.axis = val[0]
		default:
			return bad("unknown setting %q; %s takes %s", key, f.kind, takes)
		}
		if err != nil {
			return filterStage{}, err
		}
	}
	switch {
	case f.kind == "gauss" && sigmas != 1:
		return bad("give one of sigma_mm (σ in mm on the detector) or sigma_px (σ in pixels)")
	case f.kind == "box" && f.size == 0:
		return bad("give the box's size in pixels, e.g. box:3")
	case (f.kind == "deriv" || f.kind == "sobel") && f.axis == 0:
		return bad("give the axis, e.g. %s:x", f.kind)
	}
	if !f.needsPixel() { // its taps do not depend on the detector: check them now
		if _, _, err := f.taps(1, 1); err != nil {
			return bad("%v", err)
		}
	}
	return f, nil
}

// needsPixel says whether the stage's taps depend on the detector's pixel
// size: a σ in mm, a derivative per mm.
func (f filterStage) needsPixel() bool {
	u, v := f.pixelAxes()
	return u || v
}

// pixelAxes says which of the pixel's sizes the taps depend on: along a
// row (du), down a column (dv).
func (f filterStage) pixelAxes() (du, dv bool) {
	switch f.kind {
	case "gauss":
		return f.mm, f.mm
	case "deriv", "sobel":
		return f.axis == 'x', f.axis == 'y'
	}
	return false, false
}

// String is the stage written out in full, as shards record it.
func (f filterStage) String() string {
	mode := "reflect"
	if f.mode == ops.FilterNearest {
		mode = "nearest"
	}
	switch f.kind {
	case "gauss":
		unit := "px"
		if f.mm {
			unit = "mm"
		}
		return fmt.Sprintf("gauss:sigma_%s=%g,truncate=%g,mode=%s", unit, f.sigma, f.truncate, mode)
	case "box":
		return fmt.Sprintf("box:%d,mode=%s", f.size, mode)
	}
	return fmt.Sprintf("%s:%c,mode=%s", f.kind, f.axis, mode)
}

// taps are the stage's kernels along a row (across the columns) and down
// a column for pixels du mm apart along a row and dv mm down a column.
func (f filterStage) taps(du, dv float64) (row, col []float32, err error) {
	one := []float32{1}
	switch f.kind {
	case "gauss":
		sr, sc := f.sigma, f.sigma
		if f.mm {
			sr, sc = f.sigma/dv, f.sigma/du
		}
		if row, err = ops.GaussianTaps(sc, f.truncate); err != nil {
			return nil, nil, err
		}
		col, err = ops.GaussianTaps(sr, f.truncate)
		return row, col, err
	case "box":
		row, err = ops.BoxTaps(f.size)
		return row, row, err
	}
	step, smooth := du, one
	if f.axis == 'y' {
		step = dv
	}
	if f.kind == "sobel" {
		smooth = ops.SmoothTaps()
	}
	d, err := ops.DerivativeTaps(step)
	if f.axis == 'y' {
		return smooth, d, err
	}
	return d, smooth, err
}

// Filter is a run's --filter stages, in order, each with its kernel
// (ops.SepKernel) for the detector's pixel size: SetPoses makes them for
// the poses to render.
type Filter struct {
	stages  []filterStage
	Kernels []*ops.SepKernel
	pixel   [2]float64 // the pixel size the kernels are for; 0: none yet
}

// newFilter makes the stages' kernels; those that depend on the pixel
// size are the identity until SetPoses.
func newFilter(stages []filterStage) (*Filter, error) {
	f := &Filter{stages: stages}
	for _, s := range stages {
		row, col := []float32{1}, []float32{1}
		if !s.needsPixel() {
			var err error
			if row, col, err = s.taps(1, 1); err != nil {
				return nil, fmt.Errorf("--filter %q: %w", s, err)
			}
		}
		k, err := ops.NewSepKernel(s.String(), row, col, s.mode)
		if err != nil {
			return nil, err
		}
		f.Kernels = append(f.Kernels, k)
	}
	return f, nil
}

// Stages are the stages written out in full, in order.
func (f *Filter) Stages() []string {
	out := make([]string, len(f.stages))
	for i, s := range f.stages {
		out[i] = s.String()
	}
	return out
}

// SetPoses makes the kernels for the poses' pixel size (Pose.Pixel: du
// along a row, dv down a column): a stage that depends on it needs every
// pose to have the same.
func (f *Filter) SetPoses(poses []ops.Pose) error {
	if len(poses) == 0 {
		return nil
	}
	px := poses[0].Pixel
	for i, p := range poses {
		differs := [2]bool{math.Abs(p.Pixel[0]-px[0]) > 1e-9*px[0], math.Abs(p.Pixel[1]-px[1]) > 1e-9*px[1]}
		if !differs[0] && !differs[1] {
			continue
		}
		for _, s := range f.stages {
			if u, v := s.pixelAxes(); u && differs[0] || v && differs[1] {
				return fmt.Errorf("--filter %q: poses 0 and %d have different pixel sizes (%g×%g and %g×%g mm), and the filter is in mm on the detector: render poses of one pixel size together, or give a Gaussian's σ in pixels (sigma_px)",
					s, i, px[0], px[1], p.Pixel[0], p.Pixel[1])
			}
		}
	}
	if px == f.pixel {
		return nil
	}
	for i, s := range f.stages {
		if !s.needsPixel() {
			continue
		}
		row, col, err := s.taps(px[0], px[1])
		if err == nil {
			err = f.Kernels[i].Set(row, col)
		}
		if err != nil {
			return fmt.Errorf("--filter %q with pixels of %g×%g mm: %w", s, px[0], px[1], err)
		}
	}
	f.pixel = px
	return nil
}
