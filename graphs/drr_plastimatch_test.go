package graphs

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tapeloop/tapeloop/ops"
)

// TestDRRAgreesWithPlastimatch renders one .mha volume (identity
// direction, anisotropic spacing, origin off zero) over the same four
// poses with tapeloop and with `plastimatch drr` (its exact ray tracer, no
// HU conversion) and checks that the images correlate to ≥ 0.999 and that
// tapeloop's line integrals, in mm, are ten times plastimatch's, in cm.
// plastimatch ignores direction cosines, so it is a peer for the origin,
// the spacing and the detector geometry only. The volume's content stays
// clear of its box, whose faces plastimatch places at the outer voxels'
// centres rather than their outer faces.
func TestDRRAgreesWithPlastimatch(t *testing.T) {
	pm, err := exec.LookPath("plastimatch")
	if err != nil {
		t.Skip("plastimatch not installed (apt-get install plastimatch)")
	}
	dir := t.TempDir()
	n := [3]int{40, 32, 24}
	sp := [3]float64{1, 1.25, 1.5}
	off := [3]float64{-19, -14.5, -20}
	var c [3]float64 // the box's centre
	for a := range 3 {
		c[a] = off[a] + float64(n[a]-1)/2*sp[a]
	}
	// Two ellipsoids and a box of different values, off-centre.
	in := func(x, y, z, cx, cy, cz, rx, ry, rz float64) bool {
		return math.Pow((x-cx)/rx, 2)+math.Pow((y-cy)/ry, 2)+math.Pow((z-cz)/rz, 2) < 1
	}
	var data []byte
	for k := range n[2] {
		for j := range n[1] {
			for i := range n[0] {
				x, y, z := off[0]+float64(i)*sp[0]-c[0], off[1]+float64(j)*sp[1]-c[1], off[2]+float64(k)*sp[2]-c[2]
				v := 0.0
				if in(x, y, z, 0, 0, 0, 15, 14, 13) {
					v += 0.02
				}
				if in(x, y, z, 5, -3, 4, 6, 4, 8) {
					v += 0.03
				}
				if math.Abs(x+8) < 3 && math.Abs(y-6) < 2 && math.Abs(z+5) < 4 {
					v += 0.05
				}
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
			}
		}
	}
	hdr := fmt.Sprintf("ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\nCompressedData = False\n"+
		"TransformMatrix = 1 0 0 0 1 0 0 0 1\nOffset = %g %g %g\nElementSpacing = %g %g %g\nDimSize = %d %d %d\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n",
		off[0], off[1], off[2], sp[0], sp[1], sp[2], n[0], n[1], n[2])
	vol := filepath.Join(dir, "v.mha")
	if err := os.WriteFile(vol, append([]byte(hdr), data...), 0o644); err != nil {
		t.Fatal(err)
	}

	// plastimatch's geometry: the source at iso + SAD·nrm, the detector's
	// centre at iso − (SID − SAD)·nrm, its columns along vup × nrm and its
	// rows down −vup, pixel (r, c) centred (N−1)/2 pixels from the middle.
	const size, pixel, sad, sid = 64, 1.0, 300.0, 450.0
	iso := [3]float64{2, -1, 3}
	views := []struct{ nrm, vup [3]float64 }{
		{[3]float64{1, 0, 0}, [3]float64{0, 0, 1}},
		{[3]float64{0, 1, 0}, [3]float64{0, 0, 1}},
		{[3]float64{math.Cos(0.7), math.Sin(0.7), 0}, [3]float64{0, 0, 1}},
		{[3]float64{0, 0.6, 0.8}, [3]float64{1, 0, 0}},
	}
	cross := func(a, b [3]float64) [3]float64 {
		return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
	}
	var poses []ops.Pose
	var peer [][]float32
	for i, w := range views {
		var p ops.Pose
		for a := range 3 {
			p.Source[a] = iso[a] + sad*w.nrm[a]
			p.Center[a] = iso[a] - (sid-sad)*w.nrm[a]
			p.V[a] = -w.vup[a]
		}
		p.U, p.Rows, p.Cols, p.Pixel = cross(w.vup, w.nrm), size, size, [2]float64{pixel, pixel}
		poses = append(poses, p)
		prefix := filepath.Join(dir, fmt.Sprintf("pm%d_", i))
		v3 := func(v [3]float64) string { return fmt.Sprintf("%.17g %.17g %.17g", v[0], v[1], v[2]) }
		cmd := exec.Command(pm, "drr", "-i", "exact", "-P", "none", "-t", "raw",
			"-r", fmt.Sprintf("%d %d", size, size), "-z", fmt.Sprintf("%g %g", size*pixel, size*pixel),
			"--sad", fmt.Sprint(sad), "--sid", fmt.Sprint(sid), "-n", v3(w.nrm), "--vup", v3(w.vup), "-o", v3(iso), "-O", prefix, vol)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("plastimatch drr: %v\n%s", err, out)
		}
		b, err := os.ReadFile(prefix + "0000.raw")
		if err != nil || len(b) != 4*size*size {
			t.Fatalf("plastimatch's image: %d bytes, %v", len(b), err)
		}
		img := make([]float32, size*size)
		for k := range img {
			img[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
		}
		peer = append(peer, img)
	}

	geo := filepath.Join(dir, "geometry.json")
	b, _ := json.Marshal(map[string]any{"poses": poses})
	os.WriteFile(geo, b, 0o644)
	spec := DefaultDRRSpec()
	spec.Volume, spec.Geometry = vol, geo
	ours := renderDRR(t, spec)
	for i := range views {
		a := ours[i*size*size : (i+1)*size*size]
		var sa, sb, saa, sbb, sab float64
		for k, x := range a {
			y := float64(peer[i][k])
			sa, sb, saa, sbb, sab = sa+x, sb+y, saa+x*x, sbb+y*y, sab+x*y
		}
		m := float64(len(a))
		corr := (sab - sa*sb/m) / math.Sqrt((saa-sa*sa/m)*(sbb-sb*sb/m))
		t.Logf("view %d: correlation %.12f, tapeloop/plastimatch %.7f", i, corr, sa/sb)
		if !(corr >= 0.999) {
			t.Errorf("view %d: correlation with plastimatch %.6f, want ≥ 0.999", i, corr)
		}
		if r := sa / sb; !(math.Abs(r-10) <= 0.01) {
			t.Errorf("view %d: tapeloop (mm) / plastimatch (cm) = %.5f, want 10", i, r)
		}
	}
}
