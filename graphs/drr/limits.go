package drr

import (
	"fmt"
	"math"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// maxRaySamples bounds the trilinear samples one ray may take inside the
// volume (a ray across a 512³ volume at the default step takes about
// 1,800), and maxRayFractions the samples the longest ray of a pose
// would take over its whole length, so that sample numbers stay exact.
const (
	maxRaySamples   = 1 << 20
	maxRayFractions = 1 << 40
)

// CheckSamples refuses a trilinear step that would take more than
// maxRaySamples samples on a ray through v, or more than maxRayFractions
// over a pose's longest ray: a step far below the voxel size, which would
// keep the kernel busy for days. It also refuses a step so long that the
// samples of a pose lie further apart than v is across: no ray could
// take two samples in it, and the images would be zeros or one sample
// times the step. given says the step is the user's (--step), not the
// default.
func CheckSamples(v *volume.Volume, poses []ops.Pose, step float64, given bool) error {
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
		if d > 0 && step*d/l > diag {
			return fmt.Errorf("--step %g mm: pose %d's samples lie at least %.4g mm apart, more than the volume is across "+
				"(%.4g mm), so no ray takes two samples in it: use a step near the voxel size (by default half the "+
				"smallest, %g mm)", step, i, step*d/l, diag, DefaultStep(v))
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

// DefaultStep is the trilinear step when none is given: half the smallest
// voxel size.
func DefaultStep(v *volume.Volume) float64 {
	return min(v.Spacing[0], v.Spacing[1], v.Spacing[2]) / 2
}

// StepWarning is a line when the user's trilinear step is longer than
// v's largest voxel size: the rays then pass voxels without sampling
// them, and the images are undersampled; "" else.
func StepWarning(v *volume.Volume, step float64) string {
	if big := max(v.Spacing[0], v.Spacing[1], v.Spacing[2]); step > big {
		return fmt.Sprintf("--step %g mm is longer than the largest voxel size (%g mm): the rays pass voxels without "+
			"sampling them and the images are undersampled (by default the step is half the smallest voxel size, %g mm)",
			step, big, DefaultStep(v))
	}
	return ""
}
