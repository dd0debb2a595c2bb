package pairwise

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
)

// minParallel is the work, in pair-dimensions, below which a block's
// matrix product runs on one core: about 0.1 ms there, less than what
// waking idle cores costs a caller that calls block after block from
// outside Go.
const minParallel = 1 << 22

// dotTiles runs float32 dot products of a block on the packed matrix
// product (cpukern.DotTile32, AVX-512 or arm64): the block's rows are packed once,
// shared by every core, and the columns go in tiles of up to
// cpukern.DotTileCols, handed out to the cores one at a time as each
// finishes its last, so that a core slowed by other work takes fewer
// tiles instead of holding the block up. It keeps its buffers between
// blocks.
type dotTiles struct {
	pack    *cpukern.DotPack
	scratch []*cpukern.DotScratch
	order   []int // the tiles' first columns, in the order handed out
}

// bytes is the memory the packed rows of a block of b rows of d values
// take (each core's slice of columns, at most about 400 KiB, aside).
func (t *dotTiles) bytes(b, d int) int64 { return cpukern.DotPackBytes(b, d) }

// run sets out[r·ldo+j] to rows[r]·x[j] (d values each) for r < b, j <
// nc. With upper, x's first rows are the block's rows, the block is the
// upper block of a symmetric matrix, and only the pairs with j ≥ r are
// computed; those with j > r are also copied to their mirror images
// out[j·ldo+r] where j < mirror (rows of out beyond the block: the
// matrix's rows below it, when out is the matrix itself). Each tile's
// mirror is copied by the core that computed it, at once, while the tile
// is still in its cache. It returns early, leaving out partly written,
// once stop reports true. finite reports whether the block's rows, as
// packed, held no NaN and no ±Inf. With mu (d values), the products are
// of the rows and the images less mu, subtracted as they are packed.
func (t *dotTiles) run(rows, x []float32, b, nc, d int, mu, out []float32, ldo int, upper bool, mirror int, stop func() bool) (finite bool) {
	if b <= 0 || nc <= 0 {
		return true
	}
	if t.pack == nil || !t.pack.Fits(b, d) {
		t.pack = cpukern.NewDotPack(b, d)
	}
	t.pack.SetRows(b)
	t.pack.SetShift(mu)
	panels := cpukern.DotPanels(b)
	var bad atomic.Bool
	parallel.Dynamic(panels, 8, func(p0, p1 int) {
		if !t.pack.Pack(rows, d, p0, p1) {
			bad.Store(true)
		}
	})

	// The tiles in order of falling cost, so that the last ones handed out
	// are small: with upper, the whole tiles right of the block's diagonal
	// block, then the diagonal's, from the largest (its right end) down.
	w := cpukern.DotTileCols
	t.order = t.order[:0]
	for jc := 0; jc < nc; jc += w {
		if !upper || jc >= b {
			t.order = append(t.order, jc)
		}
	}
	if upper {
		for jc := (min(b, nc) - 1) / w * w; jc >= 0; jc -= w {
			t.order = append(t.order, jc)
		}
	}

	workers := min(runtime.GOMAXPROCS(0), len(t.order))
	if work := float64(b) * float64(nc) * float64(d); work < minParallel || upper && work/2 < minParallel {
		workers = 1 // waking the other cores would cost more than it saves
	}
	cols := min(w, nc)
	if len(t.scratch) > 0 && !t.scratch[0].Fits(cols, d) {
		t.scratch = t.scratch[:0]
	}
	for len(t.scratch) < workers {
		t.scratch = append(t.scratch, cpukern.NewDotScratch(cols, d))
	}
	var next atomic.Int64
	tiles := func(s *cpukern.DotScratch) {
		for !stop() {
			i := int(next.Add(1) - 1)
			if i >= len(t.order) {
				return
			}
			jc := t.order[i]
			n, lower := min(w, nc-jc), -1
			if upper {
				lower = jc
			}
			cpukern.DotTile32(t.pack, b, n, x[jc*d:], d, s, out[jc:], ldo, lower)
			if upper && jc < mirror {
				cpukern.MirrorUpper32(b, min(n, mirror-jc), out[jc:], ldo, jc, out[jc*ldo:], ldo)
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	for i := 1; i < workers; i++ {
		go func(s *cpukern.DotScratch) {
			defer wg.Done()
			tiles(s)
		}(t.scratch[i])
	}
	tiles(t.scratch[0])
	wg.Wait()
	return !bad.Load()
}
