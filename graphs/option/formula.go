package option

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/internal/formula"
)

// ParseParams reads formula parameters written name=value, as on the
// command line (--param s=2.5): each name once, each value a finite
// number.
func ParseParams(list []string) (map[string]float64, error) {
	if len(list) == 0 {
		return nil, nil
	}
	m := make(map[string]float64, len(list))
	for _, p := range list {
		name, val, ok := strings.Cut(p, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" {
			return nil, fmt.Errorf("--param %q: want name=value", p)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("--param %q: %q is not a finite number", p, val)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("--param %s given twice: give each parameter once", name)
		}
		m[name] = v
	}
	return m, nil
}

// ParseFormula checks src against the workload's variables; "" is no
// formula. Parameters without any formula to use them are an error.
func ParseFormula(flag, src string, vars []formula.Var, params map[string]float64, reduce bool) (*formula.Formula, error) {
	if src == "" {
		return nil, nil
	}
	return formula.Parse(src, formula.Env{Flag: flag, Vars: vars, Params: params, Reduce: reduce})
}

// ParseFormulas checks a workload's formulas, which share params: each
// parameter must be used by one of them. Formulas not given are nil.
func ParseFormulas(params map[string]float64, fs ...Formula) ([]*formula.Formula, error) {
	out := make([]*formula.Formula, len(fs))
	var flags []string
	for i, f := range fs {
		flags = append(flags, f.Flag)
		if f.Src == "" {
			continue
		}
		var err error
		out[i], err = formula.Parse(f.Src, formula.Env{Flag: f.Flag, Vars: f.Vars, Params: params, Reduce: f.Reduce, Pointwise: f.Pointwise, Shared: true})
		if err != nil {
			return nil, err
		}
	}
	var unused []string
	for p := range params {
		used := false
		for _, f := range out {
			used = used || f != nil && f.Uses(p)
		}
		if !used {
			unused = append(unused, p)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, fmt.Errorf("--param %s: not used by any formula (%s)", strings.Join(unused, ", "), strings.Join(flags, ", "))
	}
	return out, nil
}

// Formula is one formula of a workload: its flag, text and variables.
type Formula struct {
	Flag, Src string
	Vars      []formula.Var
	Reduce    bool
	Pointwise bool
}

// NoParams refuses parameters given to a run without formulas.
func NoParams(params map[string]float64, flags string) error {
	if len(params) > 0 {
		return fmt.Errorf("--param: parameters are for a formula (%s), and none is given", flags)
	}
	return nil
}

// ErrNonFinite is the error of a run that asked to fail on non-finite
// values of its formula.
func ErrNonFinite(what string, n int64) error {
	return fmt.Errorf("%s gave %d non-finite values (NaN or ±Inf) and --fail-on-nonfinite is set", what, n)
}
