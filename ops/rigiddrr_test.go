package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/volume"
)

// blobVolume is a sum of random Gaussian blobs sampled on an n-grid with
// anisotropic spacing and, when oblique, a rotated direction: smooth, so
// that central differences of its trilinear field are not spoiled by the
// kinks at voxel planes.
func blobVolume(rng *rand.Rand, n [3]int64, oblique bool) *volume.Volume {
	v := &volume.Volume{N: n, Spacing: [3]float64{1.3, 0.9, 1.7}, Origin: [3]float64{-9, 4, -11}}
	v.Direction = rigid.Rotation([3]float64{0, 0, 0})
	if oblique {
		v.Direction = rigid.Rotation([3]float64{0.3, -0.2, 0.5})
	}
	type blob struct {
		c    [3]float64
		s, a float64
	}
	var bs []blob
	for range 7 {
		bs = append(bs, blob{c: [3]float64{rng.Float64() * float64(n[0]), rng.Float64() * float64(n[1]), rng.Float64() * float64(n[2])}, s: 2 + 3*rng.Float64(), a: 0.5 + rng.Float64()})
	}
	v.V = make([]float32, n[0]*n[1]*n[2])
	for i := range n[0] {
		for j := range n[1] {
			for k := range n[2] {
				x := 0.0
				for _, b := range bs {
					dx, dy, dz := float64(i)-b.c[0], float64(j)-b.c[1], float64(k)-b.c[2]
					x += b.a * math.Exp(-(dx*dx+dy*dy+dz*dz)/(2*b.s*b.s))
				}
				v.V[(i*n[1]+j)*n[2]+k] = float32(x)
			}
		}
	}
	return v
}

// biplaneViews are an AP-like and a lateral-like view of the volume's
// centre, with a slightly tilted detector on the second.
func biplaneViews(c [3]float64, rows, cols int, pixel float64) []float64 {
	a := orbitPose(c, 0.3, 400, 250, rows, cols, pixel)
	b := orbitPose(c, 0.3+math.Pi/2, 400, 250, rows, cols, pixel)
	for k := range 3 {
		b[6+k] += 0.1 * b[9+k]
	}
	return append(a, b...)
}

func randParams(rng *rand.Rand) [6]float64 {
	var p [6]float64
	for j := range 3 {
		p[j] = 0.1 * rng.NormFloat64()
		p[3+j] = 4 * rng.NormFloat64()
	}
	return p
}

// The gradient of <u, image(p)> against central differences, both methods,
// an axis-aligned and an oblique volume.
func TestRigidDRRGradientAgainstFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, oblique := range []bool{false, true} {
		for _, step := range []float64{0.7, 0} {
			vol := blobVolume(rng, [3]int64{19, 23, 17}, oblique)
			c := vol.Centre()
			op, err := NewRigidDRR(vol, biplaneViews(c, 11, 13, 2.1), 11, 13, step, [3]float64{c[0] + 3, c[1] - 2, c[2] + 1})
			if err != nil {
				t.Fatal(err)
			}
			p := randParams(rng)
			u := make([]float64, op.rays())
			for i := range u {
				u[i] = rng.NormFloat64()
			}
			g, err := op.VJP(p, u)
			if err != nil {
				t.Fatal(err)
			}
			dot := func(p [6]float64) float64 {
				if err := op.render(p, false); err != nil {
					t.Fatal(err)
				}
				s := 0.0
				for i, x := range op.out.Data().([]float64) {
					s += u[i] * x
				}
				return s
			}
			for j := range 6 {
				h := 1e-7
				if j >= 3 {
					h = 1e-6
				}
				pp, pm := p, p
				pp[j] += h
				pm[j] -= h
				fd := (dot(pp) - dot(pm)) / (2 * h)
				if rel := math.Abs(fd-g[j]) / math.Max(math.Abs(fd), 1e-3); rel > 1e-4 {
					t.Errorf("oblique=%v step=%g: ∂/∂p%d = %.9g, central differences %.9g (relative error %.2g)", oblique, step, j, g[j], fd, rel)
				}
			}
		}
	}
}

// G.Grad through a TapeMachine: the gradient of Σ u·image equals the
// direct VJP, run after run with new parameters.
func TestRigidDRRGradThroughTapeMachine(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	vol := blobVolume(rng, [3]int64{15, 17, 13}, true)
	c := vol.Centre()
	op, err := NewRigidDRR(vol, biplaneViews(c, 9, 7, 2.5), 9, 7, 0.8, c)
	if err != nil {
		t.Fatal(err)
	}
	g := G.NewGraph()
	pt := tensor.New(tensor.WithShape(6), tensor.WithBacking(make([]float64, 6)))
	theta := G.NewVector(g, tensor.Float64, G.WithShape(6), G.WithName("theta"), G.WithValue(pt))
	img, err := G.ApplyOp(op, theta)
	if err != nil {
		t.Fatal(err)
	}
	u := make([]float64, op.rays())
	for i := range u {
		u[i] = rng.NormFloat64()
	}
	ut := G.NewConstant(tensor.New(tensor.WithShape(op.NumViews(), 9, 7), tensor.WithBacking(u)), G.WithName("u"))
	cost := G.Must(G.Sum(G.Must(G.HadamardProd(img, ut))))
	grads, err := G.Grad(cost, theta)
	if err != nil {
		t.Fatal(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	direct, err := NewRigidDRR(vol, op.Views, 9, 7, 0.8, c)
	if err != nil {
		t.Fatal(err)
	}
	for run := range 4 {
		p := randParams(rng)
		copy(pt.Data().([]float64), p[:])
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		got := grads[0].Value().Data().([]float64)
		want, err := direct.VJP(p, u)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 6 {
			if math.Abs(got[j]-want[j]) > 1e-9*math.Max(1, math.Abs(want[j])) {
				t.Fatalf("run %d: G.Grad gives %v, the op's VJP %v", run, got, want)
			}
		}
		m.Reset()
	}
}
