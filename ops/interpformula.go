package ops

import (
	"sync"
	"sync/atomic"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/formula"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops/internal/opkit"
)

// InterpVars are the variables of an interpolation's reduction: the M
// interpolated values at one point, and the point.
var InterpVars = []formula.Var{
	{Name: "v", Vector: true, About: "the M interpolated values at the point"},
	{Name: "x", About: "the point"},
}

// InterpFormula is a user's reduction over the M values of one query,
// compiled for M.
type InterpFormula struct {
	F    *formula.Formula
	Prog *cpukern.FxProgram

	states sync.Pool
	bad    atomic.Int64
}

// NewInterpFormula compiles f (checked against InterpVars) for m
// interpolants.
func NewInterpFormula(f *formula.Formula, m int) (*InterpFormula, error) {
	g, err := f.Graph(m)
	if err != nil {
		return nil, err
	}
	p, err := formula.Lower(g, []int{0, 1}, false)
	if err != nil {
		return nil, err
	}
	return &InterpFormula{F: f, Prog: p}, nil
}

// NonFinite is the number of NaN or infinite results so far.
func (f *InterpFormula) NonFinite() int64 { return f.bad.Load() }

type interpState[T float32 | float64] struct {
	st    *cpukern.FxState[T]
	start []int32
	w     []float64
	pt    []T // the points a + x of local queries (Interp1D.Local)
}

// formulaReduce sets out[q] to the formula over the M values at x[q],
// placed on g: the table's grid, or the grid in the local coordinate
// (g.A ≠ t.A, Interp1D.Local), where the formula's x is t.A + x[q].
func formulaReduce[T float32 | float64](f *InterpFormula, t *InterpTable, g cpukern.CubicGrid, fpT, x, out []T) {
	local := g.A != t.A
	parallel.For(len(x), grain/16, func(lo, hi int) {
		s, ok := f.states.Get().(*interpState[T])
		if !ok {
			s = &interpState[T]{st: cpukern.NewFxState[T](f.Prog)}
		}
		defer f.states.Put(s)
		const chunk = 1024
		if len(s.start) < chunk {
			s.start, s.w = make([]int32, chunk), make([]float64, 4*chunk)
		}
		if local && len(s.pt) < chunk {
			s.pt = make([]T, chunk)
		}
		var bad int64
		for c := lo; c < hi; c += chunk {
			e := min(c+chunk, hi)
			pt := x[c:e]
			for q := c; q < e; q++ {
				st, w := t.weightsOn(float64(x[q]), g.A, g.Ub)
				s.start[q-c] = int32(st)
				copy(s.w[4*(q-c):], w[:])
			}
			if local {
				pt = s.pt[:e-c]
				for i, v := range x[c:e] {
					pt[i] = T(t.A + float64(v))
				}
			}
			s.st.Reset()
			s.st.Interp(t.M, s.start, s.w, fpT, pt, out[c:e])
			bad += opkit.CountBad(out[c:e])
		}
		f.bad.Add(bad)
	})
}
