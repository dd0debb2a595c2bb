package graphs

// Checks, made before any work, of sizes that come from files and flags: a
// volume's claimed shape against the memory limit, and the samples a
// trilinear DRR would take per ray.

import (
	"fmt"
	"math"

	"github.com/tapeloop/tapeloop/graphs/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// checkVolumeFits refuses, from its header alone, a volume file whose
// float32 voxels would not fit limit by themselves. A header it cannot
// read is left to volume.Load to explain.
func checkVolumeFits(workload, path string, opt volume.Options, limit int64) error {
	n, ok := volume.Shape(path, opt)
	if !ok {
		return nil
	}
	if err := checkVoxelsFit(workload+"'s volume", n, limit); err != nil {
		return fmt.Errorf("--volume: %s: %w", path, err)
	}
	return nil
}

// checkVoxelsFit refuses a volume of n[0]×n[1]×n[2] float32 voxels, read
// or made (a phantom, random data), that would not fit limit by itself:
// checked before it is allocated. what names it, e.g. "drr's phantom".
func checkVoxelsFit(what string, n [3]int64, limit int64) error {
	if limit <= 0 {
		return nil
	}
	need := sysmem.Mul(n[0], n[1], n[2], 4)
	if need >= 0 && need <= limit {
		return nil
	}
	if need < 0 {
		need = math.MaxInt64
	}
	return &engine.BudgetError{Workload: fmt.Sprintf("%s of %d×%d×%d voxels", what, n[0], n[1], n[2]), Need: need, Limit: limit}
}

// maxRaySamples bounds the trilinear samples one ray may take inside the
// volume (a ray across a 512³ volume at the default step takes about
// 1,800), and maxRayFractions the samples the longest ray of a pose
// would take over its whole length, so that sample numbers stay exact.
const (
	maxRaySamples   = 1 << 20
	maxRayFractions = 1 << 40
)

// checkSamples refuses a trilinear step that would take more than
// maxRaySamples samples on a ray through v, or more than maxRayFractions
// over a pose's longest ray: a step far below the voxel size, which would
// keep the kernel busy for days. given says the step is the user's
// (--step), not the default.
func checkSamples(v *volume.Volume, poses []ops.Pose, step float64, given bool) error {
	var diag float64
	for a := range 3 {
		diag = math.Hypot(diag, float64(v.N[a])*v.Spacing[a])
	}
	enc := make([]float64, ops.PoseWidth)
	for i, p := range poses {
		p.Encode(enc)
		l := ops.LongestRay(enc, p.Rows, p.Cols)
		// The shortest ray of the pose is at least the source's distance
		// from the detector plane; samples on it are step·shortest/l
		// apart, the closest of the pose.
		d := p.SourceDistance()
		whole := l / step
		inside := math.Inf(1)
		if d > 0 {
			inside = diag / (step * d / l)
		}
		if !(whole <= maxRayFractions) || !(inside <= maxRaySamples) {
			what := fmt.Sprintf("--step %g mm", step)
			if !given {
				what = fmt.Sprintf("--step (by default half the smallest voxel size, %g mm)", step)
			}
			return fmt.Errorf("%s: pose %d's rays would take up to %.3g samples in the volume (%.4g mm across) and %.3g "+
				"over the longest ray (%.4g mm); at most 2²⁰ in the volume and 2⁴⁰ over a ray: use a larger --step",
				what, i, min(inside, math.MaxFloat64), diag, whole, l)
		}
	}
	return nil
}
