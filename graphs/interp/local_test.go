package interp

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
	"github.com/tapeloop/tapeloop/ops"
)

// refValues is the interpolation of docs/interp.md written out plainly in
// float64, independently of ops: the M values of the (m, g) table f on the
// grid a + i·dx at the point x.
func refValues(f []float64, m, g int, a, dx, x float64) []float64 {
	fp := func(j, p int) float64 { // f padded with a zero at each end
		if p < 1 || p > g {
			return 0
		}
		return f[j*g+p-1]
	}
	xc := math.Min(math.Max(x, a), a+float64(g+1)*dx) - a
	ix := math.Floor(xc / dx)
	t := xc/dx - (ix + 0.5)
	w := [4]float64{
		-1.0/16 + t/24 + t*t/4 - t*t*t/6,
		9.0/16 - t*9/8 - t*t/4 + t*t*t/2,
		9.0/16 + t*9/8 - t*t/4 - t*t*t/2,
		-1.0/16 - t/24 + t*t/4 + t*t*t/6,
	}
	s := int(math.Min(math.Max(ix, 0), float64(g-2)))
	v := make([]float64, m)
	for j := range v {
		for k := range 4 {
			v[j] += fp(j, s+k) * w[k]
		}
	}
	return v
}

// refReduced is refValues reduced as r: Σ v², Σ v, all of them, or max.
func refReduced(f []float64, m, g int, a, dx float64, x []float64, r string) []float64 {
	var out []float64
	for _, xv := range x {
		v := refValues(f, m, g, a, dx, xv)
		var s float64
		switch r {
		case "none":
			out = append(out, v...)
			continue
		case "sumsq":
			for _, e := range v {
				s += e * e
			}
		case "sum":
			for _, e := range v {
				s += e
			}
		case "max(v)":
			s = math.Inf(-1)
			for _, e := range v {
				s = max(s, e)
			}
		}
		out = append(out, s)
	}
	return out
}

// queries64 are float64 queries held in memory; as Generated, the op
// makes each chunk of them itself (ops.Interp1D.FillInput).
type queries64 struct {
	x         []float64
	pos, base int
}

func (q *queries64) Len() int { return len(q.x) }
func (q *queries64) Read32(dst []float32, off int) error {
	for i := range dst {
		dst[i] = float32(q.x[off+i])
	}
	return nil
}
func (q *queries64) Read64(dst []float64, off int) error {
	copy(dst, q.x[off:])
	return nil
}

type generated64 struct{ queries64 }

func (q *generated64) Skip(n int) { q.base, q.pos = q.pos, q.pos+n }
func (q *generated64) Fill(x any, lo, hi int) {
	for i := lo; i < hi; i++ {
		v := 0.0 // past the end: padding of a short last batch
		if q.base+i < len(q.x) {
			v = q.x[q.base+i]
		}
		switch d := x.(type) {
		case []float32:
			d[i] = float32(v)
		case []float64:
			d[i] = v
		}
	}
}

// TestFloat32FarFromZero: a float32 run on a grid far from zero (a Unix
// time, 1.7·10⁹; 10³ with dx = 10⁻⁵) agrees with the float64 reference to
// float32's precision, for float64 queries read, made by the op
// (Generated), and passed to a Program, on random tables and queries of
// odd sizes, in batches that leave a short last one; every reduction and
// method, on the CPU and, in a GPU build, the GPU. Rounding x itself to
// float32 would place every query within the 128-wide (or 6-step-wide)
// float32 spacing at |x| instead.
func TestFloat32FarFromZero(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	devices := []string{"cpu"}
	if engine.GPUBuild {
		devices = append(devices, "cuda")
	}
	for _, c := range []struct{ a, dx float64 }{{0, 0.37}, {1.7e9, 1}, {1.7e9 + 0.25, 0.37}, {-1.7e9, 3}, {1e3, 1e-5}} {
		m, g, n, batch := 3+2*rng.IntN(4), 17+2*rng.IntN(20), 2001+2*rng.IntN(500), 511
		f := make([]float64, m*g)
		for i := range f {
			f[i] = 2*rng.Float64() - 1
		}
		x := make([]float64, n)
		// The grid from a little below a, and its nodes; not its last node
		// and past it, where the scheme jumps at every node (it clamps the
		// cell's start but not t) and so a query rounded across one, by
		// any arithmetic, differs by a jump.
		for i := range x {
			x[i] = c.a + (rng.Float64()*(float64(g)+0.5)-1.5)*c.dx
			if i%7 == 0 {
				x[i] = c.a + float64(rng.IntN(g-1))*c.dx
			}
		}
		for _, dev := range devices {
			for _, r := range []string{"sumsq", "sum", "none", "max(v)"} {
				for _, method := range []string{"auto", "direct"} {
					if dev == "cuda" && r == "max(v)" {
						continue // formulas run on the CPU only
					}
					name := fmt.Sprintf("a=%g/dx=%g/%s/%s/%s", c.a, c.dx, dev, r, method)
					t.Run(name, func(t *testing.T) {
						want := refReduced(f, m, g, c.a, c.dx, x, r)
						open := func() *engine.Device {
							if dev == "cuda" {
								return workloadtest.EmulatedCUDA(t, batch)
							}
							return workloadtest.CPU(t, batch, "float32")
						}
						cfg := Config{A: c.a, DX: &c.dx, Reduce: r, Method: method}
						for _, q := range []Queries{&queries64{x: x}, &generated64{queries64{x: x}}} {
							got := runJob(t, cfg, f, m, g, q, open())
							near(t, fmt.Sprintf("%T", q), got, want)
						}
						p, err := Compile(cfg, f, m, g, open())
						if err != nil {
							t.Fatal(err)
						}
						defer p.Close()
						got := make([]float32, p.OutLen(n))
						if err := p.Run(x, got); err != nil {
							t.Fatal(err)
						}
						near(t, "Program, float64 x", widen(got), want)
						// float32 x: what it holds of the points, exactly
						// (those it holds before the last node)
						var x32 []float32
						for _, v := range x {
							if u := (float64(float32(v)) - c.a) / c.dx; u < float64(g)-1.5 {
								x32 = append(x32, float32(v))
							}
						}
						got = got[:p.OutLen(len(x32))]
						if err := p.Run(x32, got); err != nil {
							t.Fatal(err)
						}
						near(t, "Program, float32 x", widen(got), refReduced(f, m, g, c.a, c.dx, widen(x32), r))
					})
				}
			}
		}
	}
}

// runJob runs the float32 interpolation cfg of the table f over the
// queries q on dev, as filejob.OpenInterp does, and returns its results.
func runJob(t *testing.T, cfg Config, f []float64, m, g int, q Queries, dev *engine.Device) []float64 {
	t.Helper()
	reduce, method, fx, err := cfg.Parse()
	if err != nil {
		t.Fatal(err)
	}
	dx, err := cfg.Spacing(g)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ops.NewInterpTable(f, m, g, cfg.A, dx, reduce, method, tensor.Float32)
	if err != nil {
		t.Fatal(err)
	}
	s := Setup{Table: tab, Reduce: reduce, Method: method, Dtype: tensor.Float32, Queries: q, Out: &collect{}}
	if fx != nil {
		if s.Formula, err = ops.NewInterpFormula(fx, m); err != nil {
			t.Fatal(err)
		}
	}
	job, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	if dev == nil {
		dev = workloadtest.CPU(t, 7, "float32")
	}
	if _, err := dev.Run(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	return s.Out.(*collect).v
}

// near fails t unless got agrees with want to float32's precision: each
// value within 2·10⁻⁵ of the largest magnitude in want (the position of
// a query in float32 relative to the origin, and the float32 weights and
// sums, are good to about 10⁻⁶ of it here; a query placed from x rounded
// to float32 is off by up to 64 grid steps, or 3).
func near(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= 2e-5*scale) {
			t.Fatalf("%s: value %d is %.9g, want %.9g (off by %.3g of the largest, %.3g)", what, i, got[i], want[i], d/scale, scale)
		}
	}
}

func widen[T float32 | float64](x []T) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}
