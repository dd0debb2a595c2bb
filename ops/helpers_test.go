package ops

// The fixtures more than one test file of package ops builds on; the
// helpers it shares with package ops/pairwise are in ops/internal/opstest.

import (
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops/internal/opstest"
)

// drrFixture is a random volume with anisotropic spacing and a non-zero
// origin, and batch oblique poses of rows×cols pixels around it: orbit
// poses (columns along z), and every third one with its detector tilted so
// that neither its rows nor its columns run along z.
func drrFixture(rng *rand.Rand, n [3]int64, sdd, sid, pixel float64, rows, cols, batch int) (*volume.Volume, *tensor.Dense) {
	vol := &volume.Volume{N: n, Origin: [3]float64{-float64(n[0]) / 2, -float64(n[1]), -float64(n[2]) / 1.5},
		Spacing: [3]float64{1.1, 1.9, 1.4}, V: opstest.Uniform32(rng, int(n[0]*n[1]*n[2]))}
	var poses []float64
	for k := range batch {
		p := orbitPose([3]float64{1, -2, 3}, 0.4+float64(k)*1.9, sdd, sid, rows, cols, pixel)
		if k%3 == 2 {
			for a := range 3 {
				p[6+a] += 0.4 * p[9+a]
				p[9+a] += 0.3 * p[6+a]
			}
		}
		poses = append(poses, p...)
	}
	return vol, tensor.New(tensor.WithShape(batch, PoseWidth), tensor.WithBacking(poses))
}
