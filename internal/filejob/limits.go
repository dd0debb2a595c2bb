package filejob

// Checks, made before any work, of sizes that come from files and flags: a
// volume's claimed shape against the memory limit.

import (
	"fmt"
	"math"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/volume"
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
