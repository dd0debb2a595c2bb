package interp

import (
	"errors"
	"fmt"
	"math"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/ops"
)

// Config is an interpolation as the user states it, without its data (the
// table and the queries). The zero value of each field is its documented
// default. Errors name the options as flags (--dx).
type Config struct {
	// A is the grid's origin: the interpolants' values are given at
	// a + i·dx, i = 0…G−1.
	A float64 `flag:"a" json:"a" help:"grid origin"`
	// DX is the grid spacing; nil means 1/(G−1), a grid over [a, a+1].
	DX *float64 `flag:"dx" json:"dx" help:"grid spacing (default 1/(G−1))"`
	// Reduce is what each query gives: "sumsq" (Σ value², the default),
	// "sum", "none" (all M values), or a formula over the M values v at
	// the point x reducing to one number, e.g. "max(v)" or
	// "mean(exp(-v))", with Params; "sum(v^2)" is sumsq, "sum(v)" sum.
	Reduce string `flag:"reduce" json:"reduce" help:"per query: sumsq (Σ value²), sum, none (all M values), or a formula over the M values v at the point x, e.g. 'max(v)' or 'mean(exp(-v))' (see docs/formulas.md)" default:"sumsq"`
	// Params are the values of the formula's parameters, by name.
	Params map[string]float64 `flag:"param" json:"params"`
	// FailOnNonFinite makes a NaN or infinite result of the formula an
	// error; without it they are counted and reported.
	FailOnNonFinite bool `flag:"fail-on-nonfinite" json:"fail_on_nonfinite" fingerprint:"-"`
	// Method is "auto" (the default: per-cell tables that reduce without
	// forming the M values, for sumsq and sum) or "direct" (every value
	// computed).
	Method string `flag:"method" json:"method" help:"auto (per-cell Gram/column-sum tables for sumsq/sum) or direct" default:"auto"`
}

// Validate checks the options without the data: the reduction, its
// parameters, the method and the grid spacing.
func (c Config) Validate() error {
	if _, _, _, err := c.Parse(); err != nil {
		return err
	}
	if c.DX != nil {
		return checkDX(*c.DX)
	}
	return nil
}

// Parse reads the reduction and the method: a built-in reduction, or
// ops.ReduceFormula and the parsed formula. A formula that is a built-in
// reduction runs as the built-in.
func (c Config) Parse() (ops.Reduce, ops.Method, *formula.Formula, error) {
	method, err := ops.ParseMethod(option.OrDefault(c.Method, "auto"))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("--method: %w", err)
	}
	reduce, err := ops.ParseReduce(option.OrDefault(c.Reduce, "sumsq"))
	if err == nil {
		if err := option.NoParams(c.Params, "--reduce"); err != nil {
			return 0, 0, nil, err
		}
		if c.FailOnNonFinite {
			return 0, 0, nil, errors.New("--fail-on-nonfinite: it is for a formula in --reduce, and there is none")
		}
		return reduce, method, nil, nil
	}
	f, err := option.ParseFormula("--reduce", c.Reduce, ops.InterpVars, c.Params, true)
	if err != nil {
		return 0, 0, nil, err
	}
	for _, b := range []struct {
		src    string
		reduce ops.Reduce
	}{{"sum(v^2)", ops.ReduceSumSq}, {"sum(v)", ops.ReduceSum}} {
		if same, err := formula.Same(f, b.src); err == nil && same {
			return b.reduce, method, nil, nil
		}
	}
	return ops.ReduceFormula, method, f, nil
}

// Spacing is the grid spacing of a grid of g points: DX, checked with the
// grid's end, or 1/(g−1).
func (c Config) Spacing(g int) (float64, error) {
	if c.DX == nil {
		return 1 / float64(g-1), nil
	}
	dx := *c.DX
	if err := checkDX(dx); err != nil {
		return 0, err
	}
	if err := checkGridEnd(c.A, dx, g); err != nil {
		return 0, err
	}
	return dx, nil
}

// checkDX refuses a grid spacing the interpolation cannot compute with:
// not a finite number above 0, or so small (subnormal) or so large that
// it or its reciprocal, by which every query is placed on the grid, is
// not a normal number.
func checkDX(dx float64) error {
	switch {
	case math.IsNaN(dx) || math.IsInf(dx, 0) || dx <= 0:
		return fmt.Errorf("--dx %g: the grid spacing must be a finite number above 0", dx)
	case dx < minNormal:
		return fmt.Errorf("--dx %g: too small: a grid spacing must be at least %g (a subnormal spacing has too few digits)", dx, minNormal)
	case 1/dx < minNormal:
		return fmt.Errorf("--dx %g: too large: 1/dx is %g, below the smallest normal number %g", dx, 1/dx, minNormal)
	}
	return nil
}

// minNormal is the smallest normal float64, 2⁻¹⁰²².
const minNormal = 0x1p-1022

// checkGridEnd refuses a grid whose last point a + (G−1)·dx is not a
// finite number (an a or dx that is itself not valid is left to
// ops.NewInterpTable to name).
func checkGridEnd(a, dx float64, g int) error {
	if !(dx > 0) || math.IsInf(dx, 0) || math.IsNaN(a) || math.IsInf(a, 0) {
		return nil
	}
	if end := a + float64(g-1)*dx; math.IsInf(end, 0) || math.IsNaN(end) {
		return fmt.Errorf("--dx %g: the grid's last point a + (G−1)·dx = %g + %d·%g is not finite", dx, a, g-1, dx)
	}
	// Queries are clamped to a + (G+1)·dx, one step past the padding.
	if ub := a + float64(g+1)*dx; math.IsInf(ub, 0) || math.IsInf(float64(g+1)*dx, 0) {
		return fmt.Errorf("--dx %g: the grid's extent (G+1)·dx = %d·%g is not finite", dx, g+1, dx)
	}
	return nil
}

// CheckGrid32 refuses a grid that a float32 run cannot place queries on:
// a spacing below float32's smallest normal number (the queries would
// keep too few digits, or be rounded to 0), or a grid whose end
// a + (G+1)·dx is beyond float32's range (the queries would be infinite).
func CheckGrid32(a, dx float64, g int) error {
	if math.IsNaN(a) || math.IsInf(a, 0) || !(dx > 0) || math.IsInf(dx, 0) {
		return nil // ops.NewInterpTable names these
	}
	if dx < math.SmallestNonzeroFloat32*(1<<23) {
		return fmt.Errorf("--dx %g: too small for float32 queries (at least %g); use --dtype float64", dx, math.SmallestNonzeroFloat32*(1<<23))
	}
	if lo, hi := math.Abs(a), math.Abs(a+float64(g+1)*dx); max(lo, hi) > math.MaxFloat32 {
		return fmt.Errorf("--a %g, --dx %g: the grid's end a + (G+1)·dx = %g is beyond float32's range (%g); use --dtype float64", a, dx, a+float64(g+1)*dx, math.MaxFloat32)
	}
	return nil
}

// coarseFraction is the largest spacing of stored queries, as a fraction
// of dx, that CoarseQueries lets pass: a query then lies within 1/2048 of
// a grid step of the point it was rounded from, the precision a float32
// run keeps anyway at the far end of a grid of 2048 to 4096 points from
// its origin (the built-in one has 4096).
const coarseFraction = 1.0 / 1024

// CoarseQueries is a warning, or "" for none, about queries stored as
// dtype ("float32" or "float16") for the grid of g points a + i·dx: when
// near the grid (at the larger of |a| and |a + (G+1)·dx|) the stored
// numbers are more than dx/1024 apart, and further apart than they would
// be as distances from a, what the grid being far from zero costs them.
// Such queries are used as stored, and exactly (a float32 run takes them
// as x − a, formed in float64): their digits were lost before the run,
// where they were rounded, so it cannot be undone here; refusing them
// would refuse queries that are exactly what the user means (grid-aligned
// ones, say).
func CoarseQueries(a, dx float64, g int, dtype string) string {
	bits := map[string]int{"float16": 11, "float32": 24}[dtype]
	if bits == 0 || !(dx > 0) || math.IsInf(dx, 0) || math.IsNaN(a) || math.IsInf(a, 0) {
		return ""
	}
	span := float64(g+1) * dx
	far := max(math.Abs(a), math.Abs(a+span))
	step := spacing(far, bits)
	if step <= dx*coarseFraction || step <= spacing(span, bits) {
		return ""
	}
	return fmt.Sprintf("the queries are %s, %.3g apart near this grid (|x| up to %.4g): %.3g steps of --dx %g, "+
		"so each may lie up to %.3g steps from the point it was rounded from; they are used as stored "+
		"(save them as float64, or subtract the grid's origin first, to keep their digits)", dtype, step, far, step/dx, dx, step/dx/2)
}

// spacing is the distance between consecutive numbers of bits significant
// bits at v > 0.
func spacing(v float64, bits int) float64 {
	_, e := math.Frexp(v) // v = m·2^e, ½ ≤ m < 1
	return math.Ldexp(1, e-bits)
}
