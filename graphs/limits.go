package graphs

// Checks, made before any work, of sizes that come from files and flags:
// the memory limit against the process's own limits, a volume's claimed
// shape against the memory limit, and the samples a trilinear DRR would
// take per ray.

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// capMemLimit checks a memory limit given by the user against the
// process's own address-space and data limits (ulimit -v, ulimit -d),
// whose excess the Go runtime meets with a crash, not an error: one above
// the ulimit itself is refused; one above what the ulimit leaves, after
// what the process has mapped and a margin for its threads and C heaps,
// is lowered to that, and a plan refused under it says so.
func capMemLimit(limit int64) (int64, error) {
	p, ok := sysmem.ProcessLimit()
	if !ok || limit <= p.Left || ownLimit(limit) {
		return limit, nil
	}
	flag := strings.Join(strings.Fields(p.Name)[:2], " ") // "ulimit -v"
	if limit > p.Limit {
		return 0, engineErrorf("--mem-limit %s: more than this process may map in all under %s (%s): give a smaller --mem-limit, or raise %s",
			sysmem.Format(limit), p.Name, sysmem.Format(p.Limit), flag)
	}
	lowered := max(p.Left, 1)
	noteLimit(lowered, fmt.Sprintf(" (lowered from --mem-limit %s to what %s leaves this process; raise %s)", sysmem.Format(limit), p.Name, flag))
	return lowered, nil
}

// limitNote is the last memory limit tapeloop worked out itself (the
// default, or a --mem-limit lowered), and why when a cgroup or ulimit set
// it: a plan refused under it says so. A limit worked out once, at Open,
// is not lowered again when a run resolves it: what the process has mapped
// since (the inputs) is counted by the plan.
var limitNote struct {
	sync.Mutex
	limit int64
	note  string
	set   bool
}

// noteLimit records limit and its note ("" for none).
func noteLimit(limit int64, note string) {
	limitNote.Lock()
	defer limitNote.Unlock()
	limitNote.limit, limitNote.note, limitNote.set = limit, note, true
}

// ownLimit reports whether limit is the one tapeloop last worked out.
func ownLimit(limit int64) bool {
	limitNote.Lock()
	defer limitNote.Unlock()
	return limitNote.set && limit == limitNote.limit
}

// noteDefaultLimit records the default limit, worked out as half of what
// b leaves.
func noteDefaultLimit(limit int64, b sysmem.Bound) {
	switch {
	case b.Rlimit:
		noteLimit(limit, fmt.Sprintf(" (the default: half of what %s leaves this process; raise %s)", b.Name, strings.Join(strings.Fields(b.Name)[:2], " ")))
	case strings.HasPrefix(b.Name, "cgroup"):
		noteLimit(limit, fmt.Sprintf(" (the default: half of what the %s leaves)", b.Name))
	default:
		noteLimit(limit, "")
	}
}

// limitNoteFor explains a memory limit of limit bytes set by a cgroup or
// ulimit: "" for any other.
func limitNoteFor(limit int64) string {
	limitNote.Lock()
	defer limitNote.Unlock()
	if limit != limitNote.limit {
		return ""
	}
	return limitNote.note
}

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
	return &BudgetError{Workload: fmt.Sprintf("%s of %d×%d×%d voxels", what, n[0], n[1], n[2]), Need: need, Limit: limit}
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
