package filejob

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/testutil"
	"github.com/tapeloop/tapeloop/ops"
)

// DICOM series for the DRR tests are written by pydicom through
// internal/volume/testdata/dicom_series.py; their geometry is stated here
// as the header's own strings, and the expected affine is worked out from
// those strings alone.

// dcmSeries is a series' geometry as its headers state it.
type dcmSeries struct {
	iop   [6]string  // ImageOrientationPatient: row, then column cosines
	ps    [2]string  // PixelSpacing: between rows, between columns, mm
	first [3]float64 // ImagePositionPatient of the first slice along the normal
	step  float64    // distance between slices along the normal, mm
	n     int        // slices
	// against: InstanceNumbers rise against the normal (slice 1 is the
	// last along it); else shuffled.
	against bool
}

func dcmFloat(t *testing.T, s string) float64 {
	t.Helper()
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// dcmDS formats x as a short exact decimal string, as a DS element holds.
func dcmDS(x float64) string {
	s := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(x, 'f', 6, 64), "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// cosines returns the row and column cosines and their cross product, the
// normal.
func (s dcmSeries) cosines(t *testing.T) (row, col, normal [3]float64) {
	for r := range 3 {
		row[r], col[r] = dcmFloat(t, s.iop[r]), dcmFloat(t, s.iop[3+r])
	}
	normal = [3]float64{row[1]*col[2] - row[2]*col[1], row[2]*col[0] - row[0]*col[2], row[0]*col[1] - row[1]*col[0]}
	return
}

// positions returns each slice's ImagePositionPatient strings, the k-th
// slice along the normal at first + k·step·normal, listed (and so written)
// in a shuffled order, and the InstanceNumbers to write them with (nil:
// the writer shuffles them).
func (s dcmSeries) positions(t *testing.T) ([][3]string, []int) {
	_, _, normal := s.cosines(t)
	var ipps [][3]string
	var inst []int
	if s.n%3 == 0 {
		t.Fatalf("%d slices: a multiple of 3", s.n)
	}
	for i := range s.n {
		k := (i*3 + 1) % s.n // a permutation: n is not a multiple of 3
		var p [3]string
		for r := range 3 {
			p[r] = dcmDS(s.first[r] + float64(k)*s.step*normal[r])
		}
		ipps = append(ipps, p)
		inst = append(inst, s.n-k)
	}
	if !s.against {
		inst = nil
	}
	return ipps, inst
}

// lps is the index → LPS mm affine the header values state: the first
// slice's position along the normal (as written), then per index step
// PixelSpacing[1] along the row cosine, PixelSpacing[0] along the column
// cosine and step along the normal.
func (s dcmSeries) lps(t *testing.T) affine {
	row, col, normal := s.cosines(t)
	var a affine
	for r := range 3 {
		a.m[r] = [3]float64{dcmFloat(t, s.ps[1]) * row[r], dcmFloat(t, s.ps[0]) * col[r], s.step * normal[r]}
		a.t[r] = dcmFloat(t, dcmDS(s.first[r]))
	}
	return a
}

// The oblique orientations: rows of orthogonal matrices with exact decimal
// entries. obliqueIOP's normal is (0.48, 0.64, 0.6), oblique2IOP's
// (0.36, −0.8, 0.48).
var (
	obliqueIOP  = [6]string{"0.36", "0.48", "-0.8", "-0.8", "0.6", "0"}
	oblique2IOP = [6]string{"0.48", "0.6", "0.64", "-0.8", "0", "0.6"}
	axialIOP    = [6]string{"1", "0", "0", "0", "1", "0"}
)

// TestDRRCubePositionDICOM is TestDRRCubePosition for DICOM series
// written by pydicom: the cube volume as CT slices, its cube's stored
// values and the background's rescaled (RescaleSlope, RescaleIntercept)
// to HU, the background below −1000 HU (air: μ = 0) and the cube at about
// +1000 HU, rendered with HU conversion.
func TestDRRCubePositionDICOM(t *testing.T) {
	type cubeCase struct {
		name, method string
		geo          dcmSeries
		syntax       string
		signed       bool
		bits         int
		slope        string
		intercept    string
		value, bg    int // stored
	}
	cases := []cubeCase{
		{"axial, shuffled names and InstanceNumbers", "siddon",
			dcmSeries{iop: axialIOP, ps: [2]string{"0.7", "0.9"}, first: [3]float64{-10.5, 20.25, -30}, step: 2.5, n: cubeN[2]},
			"explicit", false, 16, "1", "-1024", 2024, 10},
		{"oblique", "siddon",
			dcmSeries{iop: obliqueIOP, ps: [2]string{"0.8", "0.8"}, first: [3]float64{100.25, -50.5, 12}, step: 1.25, n: cubeN[2]},
			"implicit", true, 12, "2.5", "-1000.5", 800, -20},
		// The normal (1, 0, 0) × (0, −1, 0) is −z; InstanceNumbers rise with
		// z, against the normal, and the first slice along it is at z = 40.
		{"slices along -normal", "siddon",
			dcmSeries{iop: [6]string{"1", "0", "0", "0", "-1", "0"}, ps: [2]string{"0.75", "0.75"}, first: [3]float64{0, 0, 40}, step: 3, n: cubeN[2], against: true},
			"explicit", true, 16, "0.5", "0", 2000, -2100},
		{"anisotropic, oblique, against the normal", "trilinear",
			dcmSeries{iop: oblique2IOP, ps: [2]string{"1.3", "0.6"}, first: [3]float64{-40.5, 7.25, 88}, step: 2.1, n: cubeN[2], against: true},
			"implicit", false, 12, "0.75", "-1100", 2800, 10},
	}
	root := t.TempDir()
	var spec []testutil.PyDICOMSeries
	for i, c := range cases {
		ipps, inst := c.geo.positions(t)
		spec = append(spec, testutil.PyDICOMSeries{Dir: filepath.Join(root, fmt.Sprint(i)), UID: fmt.Sprintf("1.2.826.0.1.3680043.8.498.3%d", i),
			Desc: c.name, Syntax: c.syntax, Rows: cubeN[1], Cols: cubeN[0], PS: c.geo.ps[:], IOP: c.geo.iop[:], IPPs: ipps, Instances: inst,
			Signed: c.signed, BitsStored: c.bits, Slope: c.slope, Intercept: c.intercept, Seed: 30 + i,
			Cube: &testutil.PyDICOMCube{Lo: cubeLo, Size: cubeSize, Value: c.value, Background: c.bg}})
	}
	testutil.WritePyDICOM(t, spec)
	worst := 0.0
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := DefaultDRRSpec()
			s.Method, s.Volume, s.HU = c.method, spec[i].Dir, true
			lps := c.geo.lps(t)
			sp := lps.spacing()
			hu := float64(c.value)*dcmFloat(t, c.slope) + dcmFloat(t, c.intercept)
			if bg := float64(c.bg)*dcmFloat(t, c.slope) + dcmFloat(t, c.intercept); bg > -1000 {
				t.Fatalf("background %g HU: not air", bg)
			}
			mu := s.Water() * (1 + hu/1000)
			vol := float64(cubeSize[0]*cubeSize[1]*cubeSize[2]) * sp[0] * sp[1] * sp[2] * mu
			worst = max(worst, checkCube(t, s, lps, true, vol))
		})
	}
	t.Logf("largest error %.3g voxel", worst)
}

// renderDRR runs spec on the CPU and returns drr.npy's values.
func renderDRR(t *testing.T, spec DRRSpec) []float64 {
	t.Helper()
	spec.Out = filepath.Join(t.TempDir(), "out")
	dev, err := engine.CPU(0)
	if err != nil {
		t.Fatal(err)
	}
	dev = dev.Quiet()
	task, err := OpenDRR(spec, dev, true)
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if _, err := dev.WithBatch(2).Run(context.Background(), task.Job()); err != nil {
		t.Fatal(err)
	}
	if err := task.Commit(); err != nil {
		t.Fatal(err)
	}
	_, img, err := npy.ReadAll64(filepath.Join(spec.Out, "drr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// dcm2niixGeometry reads a NIfTI-1 header's sform (RAS, float32) and
// states it in the DICOM series' index order: the spacing and the LPS
// centre of the voxel the DICOM reader calls (0, 0, 0), matching each
// sform column to the header's direction (rowdir, coldir, normal) it runs
// along or against, whatever axes dcm2niix flipped or swapped. dev is how
// far the sform puts the series' corner voxels from where the header
// values do, in mm.
func dcm2niixGeometry(t *testing.T, path string, want affine, n [3]int) (spacing, origin [3]float64, dev float64) {
	t.Helper()
	h, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) < 348 || binary.LittleEndian.Uint32(h) != 348 || binary.LittleEndian.Uint16(h[254:]) == 0 {
		t.Fatalf("%s: not a little-endian NIfTI-1 file with an sform", path)
	}
	var m [3][3]float64 // LPS
	var o [3]float64
	var dim [3]int
	for r := range 3 {
		sign := 1.0
		if r < 2 {
			sign = -1
		}
		for c := range 4 {
			x := sign * float64(math.Float32frombits(binary.LittleEndian.Uint32(h[280+16*r+4*c:])))
			if c < 3 {
				m[r][c] = x
			} else {
				o[r] = x
			}
		}
		dim[r] = int(binary.LittleEndian.Uint16(h[42+2*r:]))
	}
	wsp := want.spacing()
	col := [3]int{-1, -1, -1} // the sform column of each DICOM axis
	var flip [3]bool
	for a := range 3 {
		for c := range 3 {
			var dot, norm float64
			for r := range 3 {
				dot += m[r][c] * want.m[r][a] / wsp[a]
				norm += m[r][c] * m[r][c]
			}
			if norm = math.Sqrt(norm); math.Abs(dot) > 0.999*norm && dim[c] == n[a] {
				col[a], flip[a], spacing[a] = c, dot < 0, norm
			}
		}
		if col[a] < 0 {
			t.Fatalf("%s: no sform column %v along index axis %d of the series", path, m, a)
		}
	}
	// The sform's position of DICOM voxel idx.
	at := func(idx [3]float64) [3]float64 {
		p := o
		for a := range 3 {
			f := idx[a]
			if flip[a] {
				f = float64(n[a]-1) - f
			}
			for r := range 3 {
				p[r] += m[r][col[a]] * f
			}
		}
		return p
	}
	origin = at([3]float64{})
	for _, idx := range [][3]float64{{0, 0, 0}, {float64(n[0] - 1), float64(n[1] - 1), float64(n[2] - 1)},
		{float64(n[0] - 1), 0, 0}, {0, float64(n[1] - 1), 0}, {0, 0, float64(n[2] - 1)}} {
		p, q := at(idx), want.at(idx)
		dev = max(dev, math.Sqrt((p[0]-q[0])*(p[0]-q[0])+(p[1]-q[1])*(p[1]-q[1])+(p[2]-q[2])*(p[2]-q[2])))
	}
	return spacing, origin, dev
}

// relDiff is max |a − b| / max |a|.
func relDiff(t *testing.T, a, b []float64) float64 {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d and %d pixels", len(a), len(b))
	}
	var big, diff float64
	for k := range a {
		big = max(big, math.Abs(a[k]))
		diff = max(diff, math.Abs(a[k]-b[k]))
	}
	if big == 0 {
		t.Fatal("blank images")
	}
	return diff / big
}

// TestDRRDICOMMatchesDcm2niix renders pydicom-written series (random
// voxels, the values most sensitive to where each voxel lies) directly and
// as dcm2niix converts them to NIfTI, over an orbit and over explicit
// poses, in LPS and RAS, and compares the images (max |a − b| / max |a|):
// whatever axes dcm2niix flips, its affine puts the voxels where the DICOM
// headers do.
//
// dcm2niix works in float32: it holds ImagePositionPatient as float32,
// takes the slice step from those and stores a float32 sform, so its
// voxels can lie some 1e-5 mm from where the header values put them
// (1.6e-5 mm for the oblique series, 1.25 mm apart becoming 1.249998846),
// and random voxels make the images move by about as many parts in 10⁵
// (2.3e-5 for the oblique series' explicit poses). So what is checked to
// 1e-5 is the NIfTI against the series rendered with dcm2niix's own
// spacing and origin (--spacing, --origin, from its sform), flips and all;
// that sform must lie within 1e-4 mm of the header values; and the series
// as it stands must match to 1e-5 where dcm2niix's geometry is the headers'
// to 1e-6 mm (the axial series), to 5e-5 where it is not.
func TestDRRDICOMMatchesDcm2niix(t *testing.T) {
	conv, err := exec.LookPath("dcm2niix")
	if err != nil {
		t.Skip("dcm2niix not installed (Debian: apt-get install dcm2niix)")
	}
	const rows, cols = 20, 24
	cases := []struct {
		name      string
		geo       dcmSeries
		slope     string
		intercept string
	}{
		{"axial", dcmSeries{iop: axialIOP, ps: [2]string{"0.7", "0.9"}, first: [3]float64{-10.5, 20.25, -30}, step: 2.5, n: 16}, "1", "-1024"},
		{"oblique", dcmSeries{iop: obliqueIOP, ps: [2]string{"0.8", "1.1"}, first: [3]float64{100.25, -50.5, 12}, step: 1.25, n: 17, against: true}, "2.5", "-1000.5"},
	}
	root := t.TempDir()
	var spec []testutil.PyDICOMSeries
	for i, c := range cases {
		ipps, inst := c.geo.positions(t)
		spec = append(spec, testutil.PyDICOMSeries{Dir: filepath.Join(root, c.name), UID: fmt.Sprintf("1.2.826.0.1.3680043.8.498.4%d", i),
			Desc: c.name, Syntax: "explicit", Rows: rows, Cols: cols, PS: c.geo.ps[:], IOP: c.geo.iop[:], IPPs: ipps, Instances: inst,
			Signed: true, BitsStored: 16, Slope: c.slope, Intercept: c.intercept, Seed: 40 + i})
	}
	// All 16 bits stored: dcm2niix v1.0.20220720 reads signed 12-bit
	// pixels as unsigned (−2029 as 2067).
	testutil.WritePyDICOM(t, spec)
	worst, worstOwn := 0.0, 0.0
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(root, "nii-"+c.name)
			os.MkdirAll(out, 0o755)
			if b, err := exec.Command(conv, "-z", "n", "-b", "n", "-f", "vol", "-o", out, spec[i].Dir).CombinedOutput(); err != nil {
				t.Fatalf("dcm2niix: %v\n%s", err, b)
			}
			nii := filepath.Join(out, "vol.nii")
			lps := c.geo.lps(t)
			n := [3]int{cols, rows, c.geo.n}
			sp, o, dev := dcm2niixGeometry(t, nii, lps, n)
			t.Logf("dcm2niix's sform: spacing %v (header %v), voxels up to %.3g mm from the header's positions", sp, lps.spacing(), dev)
			if dev > 1e-4 {
				t.Fatalf("dcm2niix's sform puts voxels %.3g mm from the header's positions: beyond float32 rounding", dev)
			}
			// Two explicit poses through the centre, from oblique directions.
			centre := lps.at([3]float64{(cols - 1) / 2.0, (rows - 1) / 2.0, float64(c.geo.n-1) / 2})
			var poses []ops.Pose
			for _, d := range [][3]float64{{0.6, -0.48, 0.64}, {-0.36, 0.8, 0.48}} {
				u := [3]float64{d[1], -d[0], 0} // ⟂ d
				l := math.Hypot(u[0], u[1])
				u = [3]float64{u[0] / l, u[1] / l, 0}
				v := [3]float64{d[1]*u[2] - d[2]*u[1], d[2]*u[0] - d[0]*u[2], d[0]*u[1] - d[1]*u[0]}
				var p ops.Pose
				for a := range 3 {
					p.Source[a] = centre[a] + 400*d[a]
					p.Center[a] = centre[a] - 300*d[a]
				}
				p.U, p.V, p.Rows, p.Cols, p.Pixel = u, v, 56, 64, [2]float64{1.25, 1.1}
				poses = append(poses, p)
			}
			for _, frame := range []string{"lps", "ras"} {
				fp, fo := poses, o
				if frame == "ras" {
					fp = nil
					for _, p := range poses {
						for r := range 2 {
							p.Source[r], p.Center[r], p.U[r], p.V[r] = -p.Source[r], -p.Center[r], -p.U[r], -p.V[r]
						}
						fp = append(fp, p)
					}
					fo[0], fo[1] = -fo[0], -fo[1]
				}
				b, _ := json.Marshal(map[string]any{"poses": fp})
				geo := filepath.Join(t.TempDir(), "geometry.json")
				if err := os.WriteFile(geo, b, 0o644); err != nil {
					t.Fatal(err)
				}
				for _, pose := range []string{"orbit", "geometry"} {
					s := DefaultDRRSpec()
					s.Frame = frame
					if pose == "orbit" {
						s.Orbit, s.Detector, s.Pixel = 4, "48x40", 2
					} else {
						s.Geometry = geo
					}
					s.Volume = spec[i].Dir
					dicom := renderDRR(t, s)
					s.Spacing = &[3]float64{sp[0], sp[1], sp[2]}
					s.Origin = &[3]float64{fo[0], fo[1], fo[2]}
					own := renderDRR(t, s) // the series at dcm2niix's geometry
					s.Volume, s.Spacing, s.Origin = nii, nil, nil
					niix := renderDRR(t, s)
					rel, relOwn, moved := relDiff(t, dicom, niix), relDiff(t, own, niix), relDiff(t, dicom, own)
					worst, worstOwn = max(worst, rel), max(worstOwn, relOwn)
					t.Logf("%s, %s: max |DICOM − dcm2niix| / max |DICOM| = %.3g; at dcm2niix's spacing and origin %.3g; those alone move the DICOM image by %.3g",
						frame, pose, rel, relOwn, moved)
					if relOwn > 1e-5 {
						t.Errorf("%s, %s: the series at dcm2niix's spacing and origin and the NIfTI differ by %.3g of the largest value, want ≤ 1e-5", frame, pose, relOwn)
					}
					// 1e-5 where dcm2niix's geometry is the headers' to 1e-6 mm
					// (the axial series); where its float32 slice step moves
					// voxels further (the oblique one), 5e-5.
					limit := 1e-5
					if dev > 1e-6 {
						limit = 5e-5
					}
					if rel > limit {
						t.Errorf("%s, %s: DICOM and dcm2niix's NIfTI differ by %.3g of the largest value, want ≤ %g (its geometry is %.3g mm off)", frame, pose, rel, limit, dev)
					}
				}
			}
		})
	}
	t.Logf("largest relative difference %.3g; at dcm2niix's spacing and origin %.3g", worst, worstOwn)
}
