package filejob

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/ops"
)

// The cube tests: a volume file with a bright cube in one corner, rendered
// by OpenDRR from three sides, the centroid of the cube's shadow on each
// detector mapped back to world mm and compared with where the file's
// header puts the cube, worked out independently of the readers: by
// nibabel for NIfTI, from the header's own numbers for MetaImage.

// affine maps a continuous voxel index to world mm: m·idx + t.
type affine struct {
	m [3][3]float64
	t [3]float64
}

func (a affine) at(idx [3]float64) [3]float64 {
	p := a.t
	for r := range 3 {
		for c := range 3 {
			p[r] += a.m[r][c] * idx[c]
		}
	}
	return p
}

// flipXY turns LPS into RAS and back: x and y negated.
func (a affine) flipXY() affine {
	for r := range 2 {
		a.t[r] = -a.t[r]
		for c := range 3 {
			a.m[r][c] = -a.m[r][c]
		}
	}
	return a
}

// spacing is the length of each column of m.
func (a affine) spacing() [3]float64 {
	var s [3]float64
	for c := range 3 {
		s[c] = math.Sqrt(a.m[0][c]*a.m[0][c] + a.m[1][c]*a.m[1][c] + a.m[2][c]*a.m[2][c])
	}
	return s
}

// The test volume: cubeN voxels, the cube of ones at cubeLo, cubeSize
// voxels a side, near the corner of the high y and z.
var (
	cubeN    = [3]int{18, 14, 10}
	cubeLo   = [3]int{2, 9, 6}
	cubeSize = [3]int{4, 4, 3}
)

// cubeValue is the test volume's value at (i, j, k).
func cubeValue(i, j, k int) float32 {
	if i >= cubeLo[0] && i < cubeLo[0]+cubeSize[0] && j >= cubeLo[1] && j < cubeLo[1]+cubeSize[1] && k >= cubeLo[2] && k < cubeLo[2]+cubeSize[2] {
		return 1
	}
	return 0
}

// cubeCentre is the cube's centroid in voxel index space: the mean of its
// voxels' centres.
func cubeCentre() [3]float64 {
	var c [3]float64
	for a := range 3 {
		c[a] = float64(cubeLo[a]) + float64(cubeSize[a]-1)/2
	}
	return c
}

// rot is the rotation by angle radians about axis.
func rot(axis [3]float64, angle float64) [3][3]float64 {
	n := math.Sqrt(axis[0]*axis[0] + axis[1]*axis[1] + axis[2]*axis[2])
	x, y, z := axis[0]/n, axis[1]/n, axis[2]/n
	c, s := math.Cos(angle), math.Sin(angle)
	C := 1 - c
	return [3][3]float64{
		{c + x*x*C, x*y*C - z*s, x*z*C + y*s},
		{y*x*C + z*s, c + y*y*C, y*z*C - x*s},
		{z*x*C - y*s, z*y*C + x*s, c + z*z*C},
	}
}

// scaled is r·diag(s) with translation t.
func scaled(r [3][3]float64, s, t [3]float64) affine {
	var a affine
	for i := range 3 {
		for j := range 3 {
			a.m[i][j] = r[i][j] * s[j]
		}
	}
	a.t = t
	return a
}

var eye3 = [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}

// nibabelScript writes the cube volume as NIfTI with the sform and qform
// given (null: code 0) and the spatial unit, loads it back and prints the
// affine nibabel makes of the file and its unit.
const nibabelScript = `
import json, sys
import numpy as np, nibabel as nib
a = json.loads(sys.argv[1])
d = np.zeros(a["shape"], np.float32)
lo, sz = a["lo"], a["size"]
d[lo[0]:lo[0]+sz[0], lo[1]:lo[1]+sz[1], lo[2]:lo[2]+sz[2]] = 1
img = nib.Nifti1Image(d, None)
img.set_qform(None if a["qform"] is None else np.array(a["qform"]), code=a["qform_code"])
img.set_sform(None if a["sform"] is None else np.array(a["sform"]), code=a["sform_code"])
img.header.set_xyzt_units(xyz=a["units"])
nib.save(img, a["path"])
back = nib.load(a["path"])
print(json.dumps({"affine": back.affine.tolist(), "units": back.header.get_xyzt_units()[0],
                  "qform_code": int(back.header["qform_code"]), "sform_code": int(back.header["sform_code"])}))
`

// needNibabel skips the test where /usr/bin/python3 with nibabel is absent.
func needNibabel(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("/usr/bin/python3", "-c", "import numpy, nibabel").CombinedOutput(); err != nil {
		t.Skipf("python3 with numpy and nibabel not available (apt-get install python3-nibabel): %v %s", err, strings.TrimSpace(string(out)))
	}
}

// affine4 is a as nibabel's 4×4, scaled by 1/unit (mm per file unit).
func affine4(a *affine, unit float64) any {
	if a == nil {
		return nil
	}
	var m [4][4]float64
	for r := range 3 {
		for c := range 3 {
			m[r][c] = a.m[r][c] / unit
		}
		m[r][3] = a.t[r] / unit
	}
	m[3][3] = 1
	return m
}

// writeNIfTI writes the cube through nibabel with sform and qform (RAS mm;
// nil: code 0) in units, and returns the index → LPS mm affine nibabel
// reads back (its affine in mm, x and y negated).
func writeNIfTI(t *testing.T, path string, sform, qform *affine, units string) affine {
	t.Helper()
	unit := map[string]float64{"mm": 1, "meter": 1000, "micron": 1e-3}[units]
	code := func(a *affine, c int) int {
		if a == nil {
			return 0
		}
		return c
	}
	arg, _ := json.Marshal(map[string]any{"path": path, "shape": cubeN, "lo": cubeLo, "size": cubeSize,
		"sform": affine4(sform, unit), "sform_code": code(sform, 2), "qform": affine4(qform, unit), "qform_code": code(qform, 1), "units": units})
	out, err := exec.Command("/usr/bin/python3", "-c", nibabelScript, string(arg)).CombinedOutput()
	if err != nil {
		t.Fatalf("nibabel: %v\n%s", err, out)
	}
	var back struct {
		Affine    [4][4]float64 `json:"affine"`
		Units     string        `json:"units"`
		QformCode int           `json:"qform_code"`
		SformCode int           `json:"sform_code"`
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("nibabel's output %q: %v", out, err)
	}
	if back.Units != units || back.SformCode != code(sform, 2) || back.QformCode != code(qform, 1) {
		t.Fatalf("nibabel wrote units %q, codes sform %d qform %d", back.Units, back.SformCode, back.QformCode)
	}
	var a affine
	for r := range 3 {
		for c := range 3 {
			a.m[r][c] = back.Affine[r][c] * unit
		}
		a.t[r] = back.Affine[r][3] * unit
	}
	return a.flipXY()
}

// mhaKeys are the MetaImage header keys a cube file is written with.
type mhaKeys struct {
	matrix, offset string // "TransformMatrix", "Offset" or their synonyms
	local          bool   // .mha with LOCAL data, else .mhd and a .raw
	headerSize     int    // 0: none; > 0 (a data file only): junk bytes before the data; -1: junk, then the data at the end
}

// writeMeta writes the cube as MetaImage with direction d (columns: the
// index axes), origin o and spacing s, by hand, and returns the
// index → LPS mm affine its header states: o + d·(idx⊙s).
func writeMeta(t *testing.T, path string, d [3][3]float64, o, s [3]float64, k mhaKeys) affine {
	t.Helper()
	var tm []string
	for a := range 3 { // the a-th triple is the direction of index axis a
		for r := range 3 {
			tm = append(tm, fmt.Sprintf("%.17g", d[r][a]))
		}
	}
	var data []byte
	for z := range cubeN[2] {
		for y := range cubeN[1] {
			for x := range cubeN[0] {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(cubeValue(x, y, z)))
			}
		}
	}
	hdr := fmt.Sprintf("ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\nCompressedData = False\n"+
		"%s = %s\n%s = %.17g %.17g %.17g\nElementSpacing = %.17g %.17g %.17g\nDimSize = %d %d %d\nElementType = MET_FLOAT\n",
		k.matrix, strings.Join(tm, " "), k.offset, o[0], o[1], o[2], s[0], s[1], s[2], cubeN[0], cubeN[1], cubeN[2])
	if k.headerSize != 0 {
		hdr += fmt.Sprintf("HeaderSize = %d\n", k.headerSize)
		junk := make([]byte, 123)
		for i := range junk {
			junk[i] = 0x7f // NaN-ish float32 bytes, should any be read as voxels
		}
		if k.headerSize > 0 {
			junk = junk[:k.headerSize]
		}
		data = append(junk, data...)
	}
	if k.local {
		os.WriteFile(path, append([]byte(hdr+"ElementDataFile = LOCAL\n"), data...), 0o644)
	} else {
		raw := strings.TrimSuffix(path, filepath.Ext(path)) + ".raw"
		os.WriteFile(raw, data, 0o644)
		os.WriteFile(path, []byte(hdr+"ElementDataFile = "+filepath.Base(raw)+"\n"), 0o644)
	}
	return scaled(d, s, o)
}

// writeCubeNpy writes the cube as .npy (C order).
func writeCubeNpy(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := npy.NewWriter(f, npy.Float32, cubeN[:])
	var v []float32
	for i := range cubeN[0] {
		for j := range cubeN[1] {
			for k := range cubeN[2] {
				v = append(v, cubeValue(i, j, k))
			}
		}
	}
	if err := w.Write32(v); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// cubeShadow renders the volume of spec from three sides, along the x, y
// and z axes of its frame, aimed at want (the cube's centroid in that
// frame, mm), and returns how far each view puts the centroid from want in
// the detector's plane, in mm. The shadow must lie wholly on each detector
// and hold the cube's volume, vol mm³ (its line integrals over the
// detector area, brought back to the cube's distance).
func cubeShadow(t *testing.T, spec DRRSpec, want [3]float64, spacing [3]float64, vol float64) (errs [3]float64) {
	t.Helper()
	const sid, behind = 1e4, 80.0 // a distant source: nearly parallel rays
	h := 0.1 * min(spacing[0], spacing[1], spacing[2])
	// The cube's half-diagonal, and a margin of two voxels.
	var half float64
	for a := range 3 {
		half += math.Pow(float64(cubeSize[a])*spacing[a]/2, 2)
	}
	half = math.Sqrt(half) + 2*max(spacing[0], spacing[1], spacing[2])
	n := int(math.Ceil(2*half*(sid+behind)/sid/h)) | 1
	axes := [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	var poses []ops.Pose
	for e := range 3 {
		u, v := axes[(e+1)%3], axes[(e+2)%3]
		var p ops.Pose
		for a := range 3 {
			p.Source[a] = want[a] + sid*axes[e][a]
			p.Center[a] = want[a] - behind*axes[e][a]
		}
		p.U, p.V, p.Rows, p.Cols, p.Pixel = u, v, n, n, [2]float64{h, h}
		poses = append(poses, p)
	}
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{"poses": poses})
	geo := filepath.Join(dir, "geometry.json")
	if err := os.WriteFile(geo, b, 0o644); err != nil {
		t.Fatal(err)
	}
	spec.Geometry = geo
	img := renderDRR(t, spec)
	for e, p := range poses {
		im := img[e*n*n : (e+1)*n*n]
		var sum, sr, sc float64
		for r := range n {
			for c := range n {
				w := im[r*n+c]
				if w != 0 && (r == 0 || c == 0 || r == n-1 || c == n-1) {
					t.Fatalf("view %d: the shadow reaches the detector's edge: the cube is far from where the header puts it", e)
				}
				sum += w
				sr += w * float64(r)
				sc += w * float64(c)
			}
		}
		if sum == 0 {
			t.Fatalf("view %d: no shadow", e)
		}
		// The shadow's volume: line integrals × pixel area, shrunk by the
		// magnification from the cube's plane to the detector's.
		// Pixel centres sample the shadow's outline: to within a pixel
		// on each side of the narrowest shadow, a cube's edge.
		mag := (sid + behind) / sid
		edge := math.Inf(1)
		for a := range 3 {
			edge = min(edge, float64(cubeSize[a])*spacing[a])
		}
		tol := math.Pow(1+2*h/edge, 2) - 1
		if got := sum * h * h / (mag * mag); math.Abs(got-vol) > tol*vol {
			t.Errorf("view %d: the shadow holds %.4g mm³, the cube %.4g", e, got, vol)
		}
		// The centroid on the detector, back along its ray to the plane
		// through want facing the source.
		var q [3]float64
		for a := range 3 {
			q[a] = p.Center[a] + (sc/sum-float64(n-1)/2)*h*p.U[a] + (sr/sum-float64(n-1)/2)*h*p.V[a]
		}
		f := (p.Source[e] - want[e]) / (p.Source[e] - q[e])
		var d2 float64
		for a := range 3 {
			if a == e {
				continue
			}
			got := p.Source[a] + f*(q[a]-p.Source[a])
			d2 += (got - want[a]) * (got - want[a])
		}
		errs[e] = math.Sqrt(d2)
	}
	return errs
}

// TestDRRCubePosition renders a cube in one corner of a volume written in
// every format and orientation the readers handle, in LPS and with
// --frame ras, and checks that the cube's shadows put it where the file
// says, to 0.1 voxel (of the smallest spacing).
func TestDRRCubePosition(t *testing.T) {
	type cubeCase struct {
		name   string
		method string
		// write writes the file into dir and returns its path, the
		// index → LPS mm affine its header states, and whether the file
		// is framed (NIfTI, MetaImage) or not (.npy and raw: the same
		// numbers in either frame). It sets spec's fields beyond Volume.
		write func(t *testing.T, dir string, spec *DRRSpec) (string, affine, bool)
	}
	oblique := rot([3]float64{1, 2, 3}, 25*math.Pi/180)
	obliqueFlip := rot([3]float64{-2, 1, 0.5}, 50*math.Pi/180)
	for r := range 3 { // and the third index axis reversed
		obliqueFlip[r][2] = -obliqueFlip[r][2]
	}
	aniso := [3]float64{0.8, 1.3, 2.1}
	t0 := [3]float64{-9, 12.5, -31}
	nifti := func(sform, qform *affine, units string) func(*testing.T, string, *DRRSpec) (string, affine, bool) {
		return func(t *testing.T, dir string, _ *DRRSpec) (string, affine, bool) {
			needNibabel(t)
			path := filepath.Join(dir, "cube.nii.gz")
			return path, writeNIfTI(t, path, sform, qform, units), true
		}
	}
	ptr := func(a affine) *affine { return &a }
	meta := func(d [3][3]float64, s [3]float64, k mhaKeys) func(*testing.T, string, *DRRSpec) (string, affine, bool) {
		return func(t *testing.T, dir string, _ *DRRSpec) (string, affine, bool) {
			path := filepath.Join(dir, "cube.mhd")
			if k.local {
				path = filepath.Join(dir, "cube.mha")
			}
			return path, writeMeta(t, path, d, t0, s, k), true
		}
	}
	std := mhaKeys{matrix: "TransformMatrix", offset: "Offset", local: true}
	itkFlip := [3][3]float64{{-1, 0, 0}, {0, -1, 0}, {0, 0, 1}}
	cases := []cubeCase{
		{"nifti identity", "siddon", nifti(ptr(scaled(eye3, [3]float64{1, 1, 1}, t0)), ptr(scaled(eye3, [3]float64{1, 1, 1}, t0)), "mm")},
		{"nifti anisotropic", "siddon", nifti(ptr(scaled(eye3, aniso, t0)), nil, "mm")},
		{"nifti flipped", "siddon", nifti(ptr(scaled([3][3]float64{{-1, 0, 0}, {0, 1, 0}, {0, 0, -1}}, aniso, t0)), nil, "mm")},
		{"nifti oblique sform", "siddon", nifti(ptr(scaled(oblique, aniso, t0)), nil, "mm")},
		{"nifti oblique flipped sform", "trilinear", nifti(ptr(scaled(obliqueFlip, aniso, t0)), nil, "mm")},
		{"nifti oblique qform", "siddon", nifti(nil, ptr(scaled(obliqueFlip, aniso, t0)), "mm")},
		{"nifti qform != sform", "siddon", nifti(ptr(scaled(oblique, aniso, t0)), ptr(scaled(eye3, [3]float64{2, 2, 2}, [3]float64{100, 100, 100})), "mm")},
		{"nifti metres", "siddon", nifti(ptr(scaled(oblique, aniso, t0)), nil, "meter")},
		{"nifti microns", "siddon", nifti(ptr(scaled(obliqueFlip, aniso, t0)), ptr(scaled(obliqueFlip, aniso, t0)), "micron")},
		{"mha identity", "siddon", meta(eye3, [3]float64{1, 1, 1}, std)},
		{"mha anisotropic, ITK's RAS flip", "siddon", meta(itkFlip, aniso, std)},
		{"mha ITK's RAS flip, trilinear", "trilinear", meta(itkFlip, aniso, std)},
		{"mha oblique Orientation, Position", "siddon", meta(oblique, aniso, mhaKeys{matrix: "Orientation", offset: "Position", local: true})},
		{"mha oblique flipped Rotation, Origin", "trilinear", meta(obliqueFlip, aniso, mhaKeys{matrix: "Rotation", offset: "Origin", local: true})},
		{"mhd HeaderSize 64", "siddon", meta(oblique, aniso, mhaKeys{matrix: "TransformMatrix", offset: "Offset", headerSize: 64})},
		{"mhd HeaderSize -1", "siddon", meta(obliqueFlip, aniso, mhaKeys{matrix: "TransformMatrix", offset: "Offset", headerSize: -1})},
		{"mha HeaderSize -1", "siddon", meta(itkFlip, aniso, mhaKeys{matrix: "TransformMatrix", offset: "Offset", headerSize: -1, local: true})},
		{"npy --origin --spacing", "siddon", func(t *testing.T, dir string, spec *DRRSpec) (string, affine, bool) {
			path := filepath.Join(dir, "cube.npy")
			writeCubeNpy(t, path)
			spec.Origin, spec.Spacing = &[3]float64{-9, 12.5, -31}, &[3]float64{0.8, 1.3, 2.1}
			return path, scaled(eye3, aniso, t0), false
		}},
		{"raw --origin --spacing", "trilinear", func(t *testing.T, dir string, spec *DRRSpec) (string, affine, bool) {
			path := filepath.Join(dir, "cube.raw")
			var b []byte
			for i := range cubeN[0] {
				for j := range cubeN[1] {
					for k := range cubeN[2] {
						b = append(b, byte(cubeValue(i, j, k)))
					}
				}
			}
			os.WriteFile(path, b, 0o644)
			spec.RawShape, spec.RawDtype = fmt.Sprintf("%d,%d,%d", cubeN[0], cubeN[1], cubeN[2]), "uint8"
			spec.Origin, spec.Spacing = &[3]float64{-9, 12.5, -31}, &[3]float64{0.8, 1.3, 2.1}
			return path, scaled(eye3, aniso, t0), false
		}},
	}
	worst := 0.0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := DefaultDRRSpec()
			spec.Method = c.method
			path, lps, framed := c.write(t, t.TempDir(), &spec)
			spec.Volume = path
			sp := lps.spacing()
			vol := float64(cubeSize[0]*cubeSize[1]*cubeSize[2]) * sp[0] * sp[1] * sp[2]
			worst = max(worst, checkCube(t, spec, lps, framed, vol))
		})
	}
	t.Logf("largest error %.3g voxel", worst)
}

// checkCube renders spec in LPS and RAS and checks that the cube's shadows
// put it where lps, the header's index → LPS affine, says (flipped to RAS
// for a framed file), to 0.1 voxel; vol is the cube's integral. It returns
// the largest error in voxels.
func checkCube(t *testing.T, spec DRRSpec, lps affine, framed bool, vol float64) float64 {
	t.Helper()
	sp := lps.spacing()
	voxel := min(sp[0], sp[1], sp[2])
	worst := 0.0
	for _, frame := range []string{"lps", "ras"} {
		a := lps
		if frame == "ras" && framed {
			a = lps.flipXY()
		}
		spec.Frame = frame
		errs := cubeShadow(t, spec, a.at(cubeCentre()), sp, vol)
		for e, d := range errs {
			worst = max(worst, d/voxel)
			if d > 0.1*voxel {
				t.Errorf("%s, view along %c: the cube is %.3g mm (%.3g voxel) from where the header puts it", frame, "xyz"[e], d, d/voxel)
			}
		}
		t.Logf("%s: errors %.2g %.2g %.2g voxel", frame, errs[0]/voxel, errs[1]/voxel, errs[2]/voxel)
	}
	return worst
}
