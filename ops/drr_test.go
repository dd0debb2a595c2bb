package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
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

func TestDRROpMatchesKernelPerRay(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	vol := &volume.Volume{N: [3]int64{20, 24, 16}, Origin: [3]float64{-10, -12, -8}, Spacing: [3]float64{1, 1, 1}}
	vol.V = make([]float32, 20*24*16)
	for i := range vol.V {
		vol.V[i] = rng.Float32()
	}
	const rows, cols, batch = 5, 7, 3
	for _, step := range []float64{0, 0.5} {
		op := NewDRR(vol, rows, cols, step, batch)
		// Three kinds of pose, one per fan layout of the op: columns along z
		// (the orbit), rows along z (the orbit's detector turned a quarter),
		// and neither (a detector tilted about its centre).
		var poses []float64
		for b := range batch {
			p := orbitPose([3]float64{0, 0, 0}, float64(b)*0.9, 100, 50, rows, cols, 3)
			switch b % 3 {
			case 1: // u along z, v across: pixel (r, c) at centre + (c − …)·u + (r − …)·v
				ca, sa := math.Cos(float64(b)*0.9), math.Sin(float64(b)*0.9)
				centre := [3]float64{-50 * ca, -50 * sa, 0}
				u, v := [3]float64{0, 0, 3}, [3]float64{-3 * sa, 3 * ca, 0}
				for a := range 3 {
					p[3+a] = centre[a] - float64(cols-1)/2*u[a] - float64(rows-1)/2*v[a]
					p[6+a], p[9+a] = u[a], v[a]
				}
			case 2: // tilt the detector: its steps get components along every axis
				for a := range 3 {
					p[6+a] += 0.4 * p[9+a]
					p[9+a] += 0.3 * p[6+a]
				}
			}
			poses = append(poses, p...)
		}
		v, err := op.Do(tensor.New(tensor.WithShape(batch, PoseWidth), tensor.WithBacking(poses)))
		if err != nil {
			t.Fatal(err)
		}
		got := v.(*tensor.Dense).Data().([]float32)
		nonzero := 0
		for b := range batch {
			p := poses[b*PoseWidth:]
			for r := range rows {
				for c := range cols {
					dst := make([]float64, 3)
					for a := range 3 {
						dst[a] = p[3+a] + float64(c)*p[6+a] + float64(r)*p[9+a]
					}
					want := make([]float32, 1)
					cpukern.DRR(vol, p[:3], dst, want, step, LongestRay(p, rows, cols))
					// Siddon is exact to the bit; trilinear rays are summed
					// in groups, in float32 within a group.
					if g := got[(b*rows+r)*cols+c]; g != want[0] && (step == 0 || math.Abs(float64(g-want[0])) > 1e-5*math.Abs(float64(want[0]))) {
						t.Fatalf("step %v pose %d pixel (%d, %d): %v, want %v", step, b, r, c, g, want[0])
					}
					if want[0] != 0 {
						nonzero++
					}
				}
			}
		}
		if nonzero < batch*rows*cols/2 {
			t.Errorf("only %d of %d rays hit the volume: the test geometry is off", nonzero, batch*rows*cols)
		}
	}
}

func benchmarkDRR(b *testing.B, step float64, tilt bool) {
	const n, rows, cols, batch = 256, 200, 200, 4
	rng := rand.New(rand.NewPCG(53, 54))
	vol := &volume.Volume{N: [3]int64{n, n, n}, Origin: [3]float64{-128, -128, -128}, Spacing: [3]float64{1, 1, 1}}
	vol.V = make([]float32, n*n*n)
	sysmem.AdviseHugePagesOf(vol.V)
	for i := range vol.V {
		vol.V[i] = rng.Float32()
	}
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

// 256³ volume, 200×200 detector, orbit geometry of the seed's scale.
func BenchmarkDRRSiddon(b *testing.B) { benchmarkDRR(b, 0, false) }

// Trilinear at 0.5 mm: ~540 samples per ray through the 256 mm volume.
func BenchmarkDRRTrilinear(b *testing.B) { benchmarkDRR(b, 0.5, false) }

// The same with the detector sheared, so that rays go one by one rather
// than on the fan paths.
func BenchmarkDRRTiltedSiddon(b *testing.B)    { benchmarkDRR(b, 0, true) }
func BenchmarkDRRTiltedTrilinear(b *testing.B) { benchmarkDRR(b, 0.5, true) }
