package register

import (
	"math"

	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// SeenFrom returns the poses as seen from a volume moved by t: each moved
// by t⁻¹. Rendering the volume as read with them gives the images of the
// moved volume seen with the poses (a rigid motion keeps line integrals).
func SeenFrom(poses []ops.Pose, t rigid.Transform) []ops.Pose {
	inv := rigid.NewInverse(t)
	out := make([]ops.Pose, len(poses))
	for i, p := range poses {
		q := p
		q.Source = inv.Apply(p.Source)
		q.Center = inv.Apply(p.Center)
		q.U, q.V = rotT(inv.R, p.U), rotT(inv.R, p.V)
		out[i] = q
	}
	return out
}

func rotT(r rigid.Mat3, x [3]float64) [3]float64 {
	return [3]float64{
		r[0][0]*x[0] + r[1][0]*x[1] + r[2][0]*x[2],
		r[0][1]*x[0] + r[1][1]*x[1] + r[2][1]*x[2],
		r[0][2]*x[0] + r[1][2]*x[1] + r[2][2]*x[2],
	}
}

// MTRE is the mean target registration error between two transforms of
// the volume v: the mean over a 10×10×10 grid of points spanning v's box
// of |a(p) − b(p)|, in mm.
func MTRE(a, b rigid.Transform, v *volume.Volume) float64 {
	const n = 10
	s := 0.0
	for i := range n {
		for j := range n {
			for k := range n {
				idx := [3]float64{
					float64(i) / (n - 1) * float64(v.N[0]-1),
					float64(j) / (n - 1) * float64(v.N[1]-1),
					float64(k) / (n - 1) * float64(v.N[2]-1),
				}
				p := v.World(idx)
				x, y := a.Apply(p), b.Apply(p)
				s += math.Sqrt((x[0]-y[0])*(x[0]-y[0]) + (x[1]-y[1])*(x[1]-y[1]) + (x[2]-y[2])*(x[2]-y[2]))
			}
		}
	}
	return s / (n * n * n)
}

// Encode returns the poses as the float64 rows ops.DRR and ops.RigidDRR
// take.
func Encode(poses []ops.Pose) []float64 {
	out := make([]float64, len(poses)*ops.PoseWidth)
	for i, p := range poses {
		p.Encode(out[i*ops.PoseWidth:])
	}
	return out
}
