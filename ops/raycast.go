package ops

import (
	"fmt"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/volume"
)

// rayGeom is what RigidDRR and Project hand their ray kernels: the volume
// the kernels read and the rays, both in the volume's own frame, views of
// rows×cols rays each, views·rows·cols rays in all.
type rayGeom struct {
	kvol              *volume.Volume // own frame; padded for trilinear
	kgrid             *cpukern.Grid  // kvol as the C kernels take it
	src, dst          []float64      // 3 per ray
	lref              []float64      // per view: its longest ray
	views, rows, cols int
	step              float64
	// volGen and rayGen count the changes of kvol.V and of src and dst: a
	// backend that keeps copies of them refreshes those whose count moved.
	volGen, rayGen uint64
}

// kernelGrid is v, which must be in its own frame (volume.Local), as the C
// kernels take it: the same values, not a copy.
func kernelGrid(v *volume.Volume) *cpukern.Grid {
	if !v.Aligned() {
		panic("ops: the volume is not axis-aligned; map the rays into its frame (volume.Local)")
	}
	return &cpukern.Grid{V: v.V, N: v.N, Corner: v.Corner(), Spacing: v.Spacing, Padded: v.Padded}
}

func (g *rayGeom) rays() int { return g.views * g.rows * g.cols }

func (g *rayGeom) perView() int { return g.rows * g.cols }

// rayKernels runs the ray kernels of RigidDRR and Project: cpuRays on the
// CPU, raysCUDA (rigiddrr_cuda.go) on a GPU.
type rayKernels interface {
	// cast sets out[r] to ray r's line integral and, when gsrc is not
	// nil, gsrc[3r:] and gdst[3r:] to its derivatives with respect to the
	// ray's ends (cpukern.DRRGrad). stopped is polled between rows.
	cast(g *rayGeom, out, gsrc, gdst []float64, stopped func() bool) error
	// backProject sets grad (len(g.kvol.V) values) to
	// Σ_r up[r]·∂out[r]/∂kvol.V (cpukern.DRRBackProject).
	backProject(g *rayGeom, up, grad []float64) error
	// device names where the kernels run, for the op's hash and name: ""
	// on the CPU.
	device() string
}

// backParts is the number of partial sums of cpuRays.backProject: the
// rays are split into this many contiguous runs whatever the number of
// threads, each summed into its own buffer, and the buffers are added in
// order, so the result does not depend on the thread count.
const backParts = 4

// cpuRays runs the C kernels of internal/cpukern on the CPU, in parallel.
type cpuRays struct {
	part [backParts - 1][]float64 // backProject's partial sums past the first
}

func (*cpuRays) device() string { return "" }

func (*cpuRays) cast(g *rayGeom, out, gsrc, gdst []float64, stopped func() bool) error {
	parallel.Dynamic(g.views*g.rows, 4, func(lo, hi int) {
		for row := lo; row < hi && !stopped(); row++ {
			a, z := row*g.cols, (row+1)*g.cols
			var gs, gd []float64
			if gsrc != nil {
				gs, gd = gsrc[3*a:3*z], gdst[3*a:3*z]
			}
			cpukern.DRRGrad(g.kgrid, g.src[3*a:3*z], g.dst[3*a:3*z], out[a:z], gs, gd, g.step, g.lref[row/g.rows])
		}
	})
	return nil
}

func (c *cpuRays) backProject(g *rayGeom, up, grad []float64) error {
	n, per := g.rays(), g.perView()
	for i := range c.part {
		if len(c.part[i]) != len(grad) {
			c.part[i] = make([]float64, len(grad))
		}
	}
	parallel.Dynamic(backParts, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			buf := grad
			if p > 0 {
				buf = c.part[p-1]
			}
			clear(buf)
			for a, z := p*n/backParts, (p+1)*n/backParts; a < z; {
				e := min(z, (a/per+1)*per) // the end of a's view
				cpukern.DRRBackProject(g.kgrid, g.src[3*a:3*e], g.dst[3*a:3*e], up[a:e], buf, g.step, g.lref[a/per])
				a = e
			}
		}
	})
	parallel.For(len(grad), 1<<15, func(lo, hi int) {
		for _, q := range c.part {
			for i := lo; i < hi; i++ {
				grad[i] += q[i]
			}
		}
	})
	return nil
}

// backPartBytes is what cpuRays.backProject keeps for a volume of n
// values.
func backPartBytes(n int) int64 { return 8 * int64(n) * (backParts - 1) }

// rayMethod names the ray casting of a step, as the ops' String says it:
// Siddon's exact path (step ≤ 0) or trilinear samples step mm apart.
func rayMethod(step float64) string {
	if step > 0 {
		return fmt.Sprintf("trilinear step=%gmm", step)
	}
	return "siddon"
}
