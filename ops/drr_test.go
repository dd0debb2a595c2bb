package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// orbitPose encodes the pose at angle alpha of a circular orbit about the
// z axis through c, as tapeloop drr --orbit does.
func orbitPose(c [3]float64, alpha, sdd, sid float64, rows, cols int, pixel float64) []float64 {
	ca, sa := math.Cos(alpha), math.Sin(alpha)
	src := [3]float64{c[0] + sid*ca, c[1] + sid*sa, c[2]}
	det := [3]float64{c[0] - (sdd-sid)*ca, c[1] - (sdd-sid)*sa, c[2]}
	u := [3]float64{-sa, ca, 0}
	v := [3]float64{0, 0, -1}
	p := make([]float64, 0, PoseWidth)
	p = append(p, src[:]...)
	for a := range 3 {
		p = append(p, det[a]-float64(cols-1)/2*pixel*u[a]-float64(rows-1)/2*pixel*v[a])
	}
	for a := range 3 {
		p = append(p, pixel*u[a])
	}
	for a := range 3 {
		p = append(p, pixel*v[a])
	}
	return p
}

func benchmarkDRR(b *testing.B, step float64, tilt bool) {
	const n, rows, cols, batch = 256, 200, 200, 4
	rng := rand.New(rand.NewPCG(53, 54))
	vol := &volume.Volume{N: [3]int64{n, n, n}, Origin: [3]float64{-128, -128, -128}, Spacing: [3]float64{1, 1, 1}}
	vol.V = opstest.Uniform32(rng, n*n*n)
	sysmem.AdviseHugePagesOf(vol.V)
	op := NewDRR(vol, rows, cols, step, batch)
	var poses []float64
	for k := range batch {
		p := orbitPose([3]float64{0, 0, 0}, float64(k)*0.7, 1020, 510, rows, cols, 2)
		if tilt { // shear the detector: its columns no longer run along z
			for a := range 3 {
				p[9+a] += 0.2 * p[6+a]
			}
		}
		poses = append(poses, p...)
	}
	in := tensor.New(tensor.WithShape(batch, PoseWidth), tensor.WithBacking(poses))
	if _, err := op.Do(in); err != nil { // the first run allocates and pads: measure replays
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := op.Do(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "DRR/s")
}

// 256³ volume, 200×200 detector, orbit geometry of the original case's scale.
func BenchmarkDRRSiddon(b *testing.B) { benchmarkDRR(b, 0, false) }

// Trilinear at 0.5 mm: ~540 samples per ray through the 256 mm volume.
func BenchmarkDRRTrilinear(b *testing.B) { benchmarkDRR(b, 0.5, false) }

// The same with the detector sheared, so that rays go one by one rather
// than on the fan paths.
func BenchmarkDRRTiltedSiddon(b *testing.B)    { benchmarkDRR(b, 0, true) }
func BenchmarkDRRTiltedTrilinear(b *testing.B) { benchmarkDRR(b, 0.5, true) }

// TestDRRValidRows: with SetValidRows(k) only the first k poses are
// rendered, each as in a full batch, and the other images keep what they
// held; the image statistics reduce only those k.
func TestDRRValidRows(t *testing.T) {
	const n, rows, cols, batch = 21, 9, 11, 3
	rng := rand.New(rand.NewPCG(7, 8))
	vol := &volume.Volume{N: [3]int64{n, n, n}, Origin: [3]float64{-10, -10, -10}, Spacing: [3]float64{1, 1, 1}}
	vol.V = opstest.Uniform32(rng, n*n*n)
	op := NewDRR(vol, rows, cols, 0, batch)
	st := NewImageStats(batch, rows, cols)
	var poses []float64
	for k := range batch {
		poses = append(poses, orbitPose([3]float64{}, float64(k)*0.9, 1020, 510, rows, cols, 2)...)
	}
	in := tensor.New(tensor.WithShape(batch, PoseWidth), tensor.WithBacking(poses))
	out, err := op.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	full := append([]float32(nil), out.Data().([]float32)...)
	s, err := st.Do(out)
	if err != nil {
		t.Fatal(err)
	}
	fullStats := append([]float64(nil), s.Data().([]float64)...)
	// Poses 0 and 1 again, a different pose 2 that must not be rendered.
	copy(poses[2*PoseWidth:], orbitPose([3]float64{}, 2.5, 1020, 510, rows, cols, 2))
	op.SetValidRows(2)
	st.SetValidRows(2)
	out, err = op.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out.Data().([]float32) {
		if v != full[i] {
			t.Fatalf("pixel %d of the batch (pose %d): %g, want %g", i, i/(rows*cols), v, full[i])
		}
	}
	out.Data().([]float32)[2*rows*cols] = -1 // a padded image's values are not reduced
	s, err = st.Do(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range s.Data().([]float64) {
		if v != fullStats[i] {
			t.Fatalf("statistic %d: %g, want %g", i, v, fullStats[i])
		}
	}
}
