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
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/npy"
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

// runDRRInto runs spec with its Out and commits the outputs.
func runDRRInto(t *testing.T, spec DRRSpec) {
	t.Helper()
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
}

// centroid is the intensity-weighted centre (column, row) of a
// rows×cols image, pixel centres at whole numbers.
func centroid(img []float32, rows, cols int) (c, r float64) {
	var s float64
	for k, v := range img {
		w := float64(v)
		s += w
		c += w * float64(k%cols)
		r += w * float64(k/cols)
	}
	return c / s, r / s
}

// TestDRRGeometryMatchesPlastimatch places a small bright blob (a
// Gaussian of σ = 1.2 mm over fine voxels, symmetric about one voxel's
// centre, smooth enough on the detector that its sampled centroid is its
// centre's image) at the volume's centre and at an off-centre world
// point, renders it with
// `plastimatch drr` over four poses (oblique ones, an isocentre off the
// volume's centre, a detector of unequal rows and columns and pixel
// sizes), and checks that the blob's centroid in plastimatch's image lies
// within 0.15 px of where the pose's 3×4 matrix in tapeloop's
// geometry.json projects the point (measured: at most 0.08 px, the
// blob's own sampling, in both tools' images alike), within 0.02 px of
// the centroid in tapeloop's image, and that the matrix puts the point
// where plastimatch's own geometry puts it (worked out here from its documentation: the source at iso +
// SAD·nrm, the detector's centre at iso − (SID − SAD)·nrm, rows from the
// top, the edge vup points to, columns along vup × nrm, the central ray
// at pixel ((R−1)/2, (C−1)/2)). plastimatch 1.9.4 takes -r and -z as
// "columns rows", not "rows columns" as its help says (with them given
// rows first, a detector of unequal rows and columns or pixel sizes puts
// the blob pixels away, its rows and columns swapped), and writes its raw
// image row by row, columns fastest. The run also writes drr.mha and drr.tiff,
// which plastimatch (ITK) must read with the detector's size and pixel
// spacing and the images' values.
func TestDRRGeometryMatchesPlastimatch(t *testing.T) {
	pm, err := exec.LookPath("plastimatch")
	if err != nil {
		t.Skip("plastimatch not installed (apt-get install plastimatch)")
	}
	dir := t.TempDir()
	n := [3]int{49, 45, 53}
	sp := [3]float64{0.3, 0.35, 0.25}
	off := [3]float64{-4, -11, -2}
	const rows, cols, drow, dcol, sad, sid = 48, 64, 0.9, 0.7, 300.0, 480.0
	iso := [3]float64{3, -2, 1.5}
	views := []struct{ nrm, vup [3]float64 }{
		{[3]float64{1, 0, 0}, [3]float64{0, 0, 1}},
		{[3]float64{0, -1, 0}, [3]float64{0, 0, 1}},
		{[3]float64{math.Cos(2.1), math.Sin(2.1), 0}, [3]float64{0, 0, 1}},
		{[3]float64{0, 0.6, 0.8}, [3]float64{1, 0, 0}},
	}
	cross := func(a, b [3]float64) [3]float64 {
		return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
	}
	dot := func(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
	var poses []ops.Pose
	for _, w := range views {
		var p ops.Pose
		for a := range 3 {
			p.Source[a] = iso[a] + sad*w.nrm[a]
			p.Center[a] = iso[a] - (sid-sad)*w.nrm[a]
			p.V[a] = -w.vup[a]
		}
		p.U, p.Rows, p.Cols, p.Pixel = cross(w.vup, w.nrm), rows, cols, [2]float64{dcol, drow}
		poses = append(poses, p)
	}
	geo := filepath.Join(dir, "poses.json")
	b, _ := json.Marshal(map[string]any{"poses": poses})
	if err := os.WriteFile(geo, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// plastimatch's pixel of world point x in view w (row, column).
	plastimatchPixel := func(w struct{ nrm, vup [3]float64 }, x [3]float64) (r, c float64) {
		var s, d, sx [3]float64
		for a := range 3 {
			s[a] = iso[a] + sad*w.nrm[a]
			d[a] = iso[a] - (sid-sad)*w.nrm[a]
			sx[a] = x[a] - s[a]
		}
		// The ray s + λ·(x − s) meets the plane through d normal to nrm.
		lam := (dot(d, w.nrm) - dot(s, w.nrm)) / dot(sx, w.nrm)
		var y [3]float64
		for a := range 3 {
			y[a] = s[a] + lam*sx[a] - d[a]
		}
		return float64(rows-1)/2 - dot(y, w.vup)/drow, float64(cols-1)/2 + dot(y, cross(w.vup, w.nrm))/dcol
	}

	for _, blob := range []struct {
		name string
		at   [3]int // the voxel it is centred on
	}{{"centre", [3]int{24, 22, 26}}, {"off-centre", [3]int{33, 13, 35}}} {
		var world [3]float64
		for a := range 3 {
			world[a] = off[a] + float64(blob.at[a])*sp[a]
		}
		var data []byte
		for k := range n[2] {
			for j := range n[1] {
				for i := range n[0] {
					d := [3]float64{float64(i-blob.at[0]) * sp[0], float64(j-blob.at[1]) * sp[1], float64(k-blob.at[2]) * sp[2]}
					v := 0.0
					if r2 := dot(d, d); r2 <= 4.2*4.2 { // 3.5 σ, inside the volume
						v = math.Exp(-r2 / (2 * 1.2 * 1.2))
					}
					data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
				}
			}
		}
		hdr := fmt.Sprintf("ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\nCompressedData = False\n"+
			"TransformMatrix = 1 0 0 0 1 0 0 0 1\nOffset = %g %g %g\nElementSpacing = %g %g %g\nDimSize = %d %d %d\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n",
			off[0], off[1], off[2], sp[0], sp[1], sp[2], n[0], n[1], n[2])
		vol := filepath.Join(dir, blob.name+".mha")
		if err := os.WriteFile(vol, append([]byte(hdr), data...), 0o644); err != nil {
			t.Fatal(err)
		}

		out := filepath.Join(dir, blob.name)
		spec := DefaultDRRSpec()
		spec.Volume, spec.Geometry, spec.Out, spec.Format = vol, geo, out, "npy,mha,tiff"
		runDRRInto(t, spec)
		gb, err := os.ReadFile(filepath.Join(out, "geometry.json"))
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			Poses []struct{ Matrix [3][4]float64 }
		}
		if err := json.Unmarshal(gb, &g); err != nil || len(g.Poses) != len(views) {
			t.Fatalf("geometry.json: %v, %d poses", err, len(g.Poses))
		}
		_, ours, err := npy.ReadAll64(filepath.Join(out, "drr.npy"))
		if err != nil {
			t.Fatal(err)
		}

		for i, w := range views {
			prefix := filepath.Join(dir, fmt.Sprintf("%s%d_", blob.name, i))
			v3 := func(v [3]float64) string { return fmt.Sprintf("%.17g %.17g %.17g", v[0], v[1], v[2]) }
			cmd := exec.Command(pm, "drr", "-i", "exact", "-P", "none", "-t", "raw",
				"-r", fmt.Sprintf("%d %d", cols, rows), "-z", fmt.Sprintf("%.17g %.17g", cols*dcol, rows*drow), // columns first
				"--sad", fmt.Sprint(sad), "--sid", fmt.Sprint(sid), "-n", v3(w.nrm), "--vup", v3(w.vup), "-o", v3(iso), "-O", prefix, vol)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("plastimatch drr: %v\n%s", err, out)
			}
			b, err := os.ReadFile(prefix + "0000.raw")
			if err != nil || len(b) != 4*rows*cols {
				t.Fatalf("plastimatch's image: %d bytes, %v", len(b), err)
			}
			img := make([]float32, rows*cols)
			for k := range img {
				img[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
			}
			pc, pr := centroid(img, rows, cols)

			m := g.Poses[i].Matrix
			var uvw [3]float64
			for a := range 3 {
				uvw[a] = m[a][0]*world[0] + m[a][1]*world[1] + m[a][2]*world[2] + m[a][3]
			}
			mc, mr := uvw[0]/uvw[2], uvw[1]/uvw[2]
			er, ec := plastimatchPixel(w, world)
			img64 := make([]float32, rows*cols)
			for k := range img64 {
				img64[k] = float32(ours[i*rows*cols+k])
			}
			oc, or := centroid(img64, rows, cols)
			t.Logf("%s, view %d: matrix (col %.4f, row %.4f); plastimatch's centroid off it by (%+.4f, %+.4f) px, its geometry by (%+.4f, %+.4f), tapeloop's centroid by (%+.4f, %+.4f)",
				blob.name, i, mc, mr, pc-mc, pr-mr, ec-mc, er-mr, oc-mc, or-mr)
			if blob.name == "off-centre" && math.Hypot(mc-float64(cols-1)/2, mr-float64(rows-1)/2) < 5 {
				t.Errorf("view %d: the off-centre blob lands %.1f px from the image centre: too close to tell conventions apart", i, math.Hypot(mc-float64(cols-1)/2, mr-float64(rows-1)/2))
			}
			for _, d := range []struct {
				what   string
				dc, dr float64
			}{{"plastimatch's centroid", pc - mc, pr - mr}, {"plastimatch's geometry", ec - mc, er - mr}, {"tapeloop's centroid", oc - mc, or - mr}} {
				if !(math.Hypot(d.dc, d.dr) <= 0.15) {
					t.Errorf("%s, view %d: %s is (%+.3f, %+.3f) px from geometry.json's projection, want within 0.15 px", blob.name, i, d.what, d.dc, d.dr)
				}
			}
			if d := math.Hypot(pc-oc, pr-or); !(d <= 0.02) {
				t.Errorf("%s, view %d: the centroids of plastimatch's and tapeloop's images are %.3f px apart, want within 0.02 px", blob.name, i, d)
			}
		}

		// ITK (plastimatch) reads drr.mha and drr.tiff as the detector's
		// stack: columns × rows × poses, the pixel spacing, the values.
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, v := range ours {
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		for _, f := range []string{"drr.mha", "drr.tiff"} {
			path := filepath.Join(out, f)
			hb, err := exec.Command(pm, "header", path).CombinedOutput()
			if err != nil {
				t.Fatalf("plastimatch header %s: %v\n%s", f, err, hb)
			}
			h := string(hb)
			for _, want := range []string{"Type = float", fmt.Sprintf("Size = %d %d %d", cols, rows, len(views)),
				fmt.Sprintf("Spacing = %.4f %.4f 1.0000", dcol, drow), "Origin = 0.0000 0.0000 0.0000"} {
				if !strings.Contains(h, want) {
					t.Errorf("plastimatch header %s: no %q in\n%s", f, want, h)
				}
			}
			sb, err := exec.Command(pm, "stats", path).CombinedOutput()
			if err != nil {
				t.Fatalf("plastimatch stats %s: %v\n%s", f, err, sb)
			}
			var smin, save, smax float64
			var nz, nv int
			if _, err := fmt.Sscanf(strings.TrimSpace(string(sb)), "MIN %g AVE %g MAX %g NONZERO %d NUMVOX %d", &smin, &save, &smax, &nz, &nv); err != nil {
				t.Fatalf("plastimatch stats %s: %v: %q", f, err, sb)
			}
			mean := sum / float64(len(ours))
			if nv != len(ours) || math.Abs(smin-lo) > 1e-5 || math.Abs(smax-hi) > 1e-5*hi || math.Abs(save-mean) > 1e-5*mean {
				t.Errorf("plastimatch stats %s: min %g mean %g max %g of %d, want %g %g %g of %d", f, smin, save, smax, nv, lo, mean, hi, len(ours))
			}
		}
	}
}
