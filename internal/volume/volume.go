// Package volume is tapeloop's voxel volume type: it reads 3-D volumes (CT
// scans and the like) from .npy, NIfTI-1 (.nii, .nii.gz), MetaImage (.mha,
// .mhd) and raw files, makes the 3-D Shepp–Logan phantom, and pads volumes
// for trilinear sampling. Every volume comes out in C order:
// value (i, j, k) at (i·ny + j)·nz + k, voxel (i, j, k) spanning
// [o + (i, j, k)⊙s, o + (i+1, j+1, k+1)⊙s) in mm.
package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/tapeloop/tapeloop/internal/finite"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/warnings"
)

// Volume is a voxel volume for ray casting: V holds N[0]·N[1]·N[2] values
// in C order; the centre of voxel idx = (i, j, k) lies at
// Origin + Direction·(idx⊙Spacing) in world mm, so voxel idx fills the box
// of sides Spacing about it, along the directions of Direction's columns.
type Volume struct {
	V []float32
	N [3]int64
	// Origin is the centre of voxel (0, 0, 0), in world mm.
	Origin  [3]float64
	Spacing [3]float64
	// Direction holds the direction cosines, orthonormal columns:
	// Direction[r][a] is the r-th world coordinate of a unit step along
	// index axis a. The zero value means the identity.
	Direction [3][3]float64
	// Padded says V carries a border of one zero voxel on every side that
	// is not part of the data (see Pad).
	Padded bool
}

// Pad returns a copy of v with a border of zero voxels on every side,
// origin moved out by one voxel along each index axis: the same line
// integrals, but trilinear sampling needs no boundary tests. Padding a
// padded volume returns it.
func Pad(v *Volume) *Volume {
	if v.Padded {
		return v
	}
	nx, ny, nz := v.N[0], v.N[1], v.N[2]
	p := &Volume{N: [3]int64{nx + 2, ny + 2, nz + 2}, Spacing: v.Spacing, Direction: v.Direction, Padded: true}
	p.Origin = v.World([3]float64{-1, -1, -1})
	p.V = make([]float32, p.N[0]*p.N[1]*p.N[2])
	sysmem.AdviseHugePagesOf(p.V)
	for i := range nx {
		for j := range ny {
			copy(p.V[((i+1)*(ny+2)+j+1)*(nz+2)+1:], v.V[(i*ny+j)*nz:(i*ny+j+1)*nz])
		}
	}
	return p
}

// ErrVolume is wrapped by every error about a volume file or its values.
var ErrVolume = errors.New("volume")

// maxVoxels bounds what a header may ask to allocate (2³² voxels, 16 GiB).
const maxVoxels = 1 << 32

// Options complete what a file does not say.
type Options struct {
	Spacing *[3]float64 // overrides the file's (default 1 mm for .npy and raw)
	Origin  *[3]float64 // the centre of voxel (0, 0, 0), in Frame; overrides the file's (default 0)
	Shape   [3]int      // raw files: the shape
	Dtype   string      // raw files: uint8, int8, uint16, int16, uint32, int32, float32, float64
	// XFastest says a raw file's voxels run x fastest (Fortran order), not
	// z fastest (C order).
	XFastest bool
	// Frame is the world frame the volume comes out in ("": LPS). Files
	// that place the volume in the patient (NIfTI, MetaImage) are
	// converted to it; .npy and raw volumes have no frame: their index
	// axes run along x, y and z of whichever frame is chosen.
	Frame Frame
	// VoxelsOnly reads the values alone, for workloads that ignore where
	// the volume lies: the header's placement is neither read nor checked
	// (origin 0, spacing 1, the identity).
	VoxelsOnly bool
	Warn       io.Writer // where warnings go (a NIfTI file without an affine); nil: discarded
	Series     string    // DICOM: the SeriesInstanceUID to read from a directory of several
}

// Load reads the volume at path, by its extension, into opt.Frame.
func Load(path string, opt Options) (*Volume, error) {
	// Warnings are held until the volume has loaded: a file that fails
	// says one thing, its error.
	var warned bytes.Buffer
	loaded := false
	if w := opt.Warn; w != nil {
		opt.Warn = &warned
		defer func() {
			if loaded {
				w.Write(warned.Bytes())
			}
		}()
	}
	lower := strings.ToLower(path)
	var v *Volume
	var err error
	frameless := false // no patient frame in the file: nothing to convert
	if raw := opt.Dtype != "" || opt.Shape != [3]int{}; raw {
		if opt.Series != "" || isDICOM(path) {
			return nil, fmt.Errorf("%w: %s: --shape and --dtype are for a raw volume; a DICOM series gives its own", ErrVolume, path)
		}
		for _, ext := range []string{".npy", ".nii", ".nii.gz", ".mha", ".mhd"} {
			if !strings.HasSuffix(lower, ".raw") && strings.HasSuffix(lower, ext) {
				return nil, fmt.Errorf("%w: %s: --shape and --dtype are for a raw volume; a %s file gives its own", ErrVolume, path, ext)
			}
		}
	}
	switch {
	case opt.Series != "" || isDICOM(path): // a directory, or "DICM" at byte 128
		v, err = loadDICOM(path, opt.Series)
	case strings.HasSuffix(lower, ".npy"):
		v, err = loadNpy(path)
		frameless = true
	case strings.HasSuffix(lower, ".nii"), strings.HasSuffix(lower, ".nii.gz"):
		v, err = loadNIfTI(path, opt.Warn, !opt.VoxelsOnly)
	case strings.HasSuffix(lower, ".mha"), strings.HasSuffix(lower, ".mhd"):
		v, err = loadMeta(path, opt.Warn, !opt.VoxelsOnly)
	case strings.HasSuffix(lower, ".raw"), opt.Dtype != "" || opt.Shape != [3]int{}:
		v, err = loadRaw(path, opt.Shape, opt.Dtype, opt.XFastest)
		frameless = true
	default:
		return nil, fmt.Errorf("%w: %s: unknown format %q (want .npy, .nii, .nii.gz, .mha, .mhd, a DICOM series directory, or raw with --shape and --dtype)", ErrVolume, path, filepath.Ext(path))
	}
	if err != nil {
		return nil, err
	}
	if !frameless && !opt.VoxelsOnly {
		v.ToFrame(opt.Frame)
	}
	if opt.Spacing != nil {
		v.Spacing = *opt.Spacing
	}
	if opt.Origin != nil {
		v.Origin = *opt.Origin
	}
	if err := Check(v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	loaded = true
	return v, nil
}

// extraData warns that a volume file holds more voxel data (avail bytes,
// from where its data starts) than its header describes (need): a wrong
// element type or size would read a scrambled volume with no other sign.
func extraData(warn io.Writer, path, in string, avail, need int64, what string) {
	if warn == nil {
		return
	}
	warnings.Printf(warn, "%s: %s %d bytes of voxel data, %d more than its %s describe: check that the header fits the data",
		path, in, avail, avail-need, what)
}

// Check validates spacing, origin, direction and values.
func Check(v *Volume) error {
	for a := range 3 {
		if !(v.Spacing[a] > 0) || math.IsInf(v.Spacing[a], 0) {
			return fmt.Errorf("%w: spacing %v: every component must be positive and finite", ErrVolume, v.Spacing)
		}
		if err := checkSpacing(v, a); err != nil {
			return err
		}
		if math.IsNaN(v.Origin[a]) || math.IsInf(v.Origin[a], 0) {
			return fmt.Errorf("%w: origin %v is not finite", ErrVolume, v.Origin)
		}
		if v.N[a] < 1 {
			return fmt.Errorf("%w: shape %v has an empty axis", ErrVolume, v.N)
		}
	}
	if err := checkDirection(v); err != nil {
		return err
	}
	if i := int64(finite.First(v.V)); i >= 0 {
		ny, nz := v.N[1], v.N[2]
		return fmt.Errorf("%w: voxel (%d, %d, %d) is %g", ErrVolume, i/(ny*nz), i/nz%ny, i%nz, v.V[i])
	}
	return nil
}

// checkSpacing refuses a spacing along axis a that rays cannot be traced
// with: one so small (subnormal) or so large that it, its reciprocal (by
// which positions become voxel indices) or the volume's extent along the
// axis, spacing·n, is not a normal number.
func checkSpacing(v *Volume, a int) error {
	const minNormal = 0x1p-1022 // the smallest normal float64
	s := v.Spacing[a]
	ext := s * float64(v.N[a])
	switch {
	case s < minNormal:
		return fmt.Errorf("%w: spacing %v: %g is too small (below %g, the smallest normal number)", ErrVolume, v.Spacing, s, minNormal)
	case 1/s < minNormal:
		return fmt.Errorf("%w: spacing %v: %g is too large (1/spacing %g is below the smallest normal number)", ErrVolume, v.Spacing, s, 1/s)
	case math.IsInf(ext, 0) || 1/ext < minNormal:
		return fmt.Errorf("%w: spacing %v: the extent %g·%d along axis %d is too large", ErrVolume, v.Spacing, s, v.N[a], a)
	}
	return nil
}

// ApplyHU converts Hounsfield units to linear attenuation per mm:
// μ = μ_water·max(0, 1 + HU/1000).
func ApplyHU(v *Volume, muWater float64) {
	for i, h := range v.V {
		v.V[i] = float32(muWater * max(0, 1+float64(h)/1000))
	}
}

func newVolume(nx, ny, nz int) (*Volume, error) {
	if nx < 1 || ny < 1 || nz < 1 {
		return nil, fmt.Errorf("%w: shape (%d, %d, %d) has an empty axis", ErrVolume, nx, ny, nz)
	}
	if n := sysmem.Mul(int64(nx), int64(ny), int64(nz)); n < 0 || n > maxVoxels {
		return nil, fmt.Errorf("%w: shape (%d, %d, %d) is too large: at most 2³² voxels", ErrVolume, nx, ny, nz)
	}
	return &Volume{V: alloc(nx * ny * nz), N: [3]int64{int64(nx), int64(ny), int64(nz)}, Spacing: [3]float64{1, 1, 1}}, nil
}

// alloc allocates voxels on huge pages where the kernel allows: rays cross
// the volume along every axis, and with 4 KiB pages nearly every step along
// the slowest axis is a TLB miss.
func alloc(n int) []float32 {
	v := make([]float32, n)
	sysmem.AdviseHugePagesOf(v)
	return v
}

func loadNpy(path string) (*Volume, error) {
	f, err := npy.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	defer f.Close()
	if len(f.Shape) != 3 {
		return nil, fmt.Errorf("%w: %s has shape %s, want a 3-D volume", ErrVolume, path, npy.ShapeString(f.Shape))
	}
	v, err := newVolume(f.Shape[0], f.Shape[1], f.Shape[2])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Read32(v.V); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrVolume, path, err)
	}
	return v, nil
}

// element decodes raw voxels of a named type in a byte order, x fastest or
// C order, into v.
type element struct {
	size   int
	decode func(b []byte) float64
}

func elementType(name string, big bool) (element, bool) {
	var o interface {
		Uint16([]byte) uint16
		Uint32([]byte) uint32
		Uint64([]byte) uint64
	} = le{}
	if big {
		o = be{}
	}
	switch name {
	case "uint8":
		return element{1, func(b []byte) float64 { return float64(b[0]) }}, true
	case "int8":
		return element{1, func(b []byte) float64 { return float64(int8(b[0])) }}, true
	case "uint16":
		return element{2, func(b []byte) float64 { return float64(o.Uint16(b)) }}, true
	case "int16":
		return element{2, func(b []byte) float64 { return float64(int16(o.Uint16(b))) }}, true
	case "uint32":
		return element{4, func(b []byte) float64 { return float64(o.Uint32(b)) }}, true
	case "int32":
		return element{4, func(b []byte) float64 { return float64(int32(o.Uint32(b))) }}, true
	case "float32":
		return element{4, func(b []byte) float64 { return float64(math.Float32frombits(o.Uint32(b))) }}, true
	case "float64":
		return element{8, func(b []byte) float64 { return math.Float64frombits(o.Uint64(b)) }}, true
	}
	return element{}, false
}

// readVoxels reads len(v.V) elements from r into v, transposing from
// x-fastest (Fortran) order when xFastest is set.
func readVoxels(r io.Reader, v *Volume, el element, xFastest bool) error {
	nx, ny, nz := v.N[0], v.N[1], v.N[2]
	buf := make([]byte, el.size*int(nx))
	if !xFastest {
		buf = make([]byte, el.size*int(nz))
	}
	outer := ny * nz
	if !xFastest {
		outer = nx * ny
	}
	for line := int64(0); line < outer; line++ {
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("%w: voxel data truncated (%v)", ErrVolume, err)
		}
		if xFastest { // line = y + ny*z; x runs along the line
			y, z := line%ny, line/ny
			for x := int64(0); x < nx; x++ {
				v.V[(x*ny+y)*nz+z] = float32(el.decode(buf[int(x)*el.size:]))
			}
		} else {
			base := line * nz
			for k := int64(0); k < nz; k++ {
				v.V[base+k] = float32(el.decode(buf[int(k)*el.size:]))
			}
		}
	}
	return nil
}

func loadRaw(path string, shape [3]int, dtype string, xFastest bool) (*Volume, error) {
	if shape == [3]int{} || dtype == "" {
		return nil, fmt.Errorf("%w: %s: a raw volume needs --shape X,Y,Z and --dtype", ErrVolume, path)
	}
	el, ok := elementType(dtype, false)
	if !ok {
		return nil, fmt.Errorf("%w: --dtype %q (want uint8, int8, uint16, int16, uint32, int32, float32 or float64)", ErrVolume, dtype)
	}
	f, err := npy.OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrVolume, err)
	}
	defer f.Close()
	// The file's size against the shape's, before allocating for the shape.
	need := sysmem.Mul(int64(shape[0]), int64(shape[1]), int64(shape[2]), int64(el.size))
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() != need {
		if need < 0 {
			return nil, fmt.Errorf("%w: %s: shape %v of %s is too large: more than 8 EiB", ErrVolume, path, shape, dtype)
		}
		return nil, fmt.Errorf("%w: %s holds %d bytes, shape %v of %s needs %d", ErrVolume, path, st.Size(), shape, dtype, need)
	}
	v, err := newVolume(shape[0], shape[1], shape[2])
	if err != nil {
		return nil, err
	}
	if err := readVoxels(bufioReader(f), v, el, xFastest); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
