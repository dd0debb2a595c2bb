package interp

import (
	"math"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		cfg  Config
		want string // the error's start; "": valid
	}{
		{Config{}, ""},
		{Config{Reduce: "sum", Method: "direct", A: -3, DX: f(0.5)}, ""},
		{Config{Reduce: "max(v)*s", Params: map[string]float64{"s": 2}, FailOnNonFinite: true}, ""},
		{Config{Reduce: "mean"}, `--reduce "mean"`},
		{Config{Method: "fast"}, "--method"},
		{Config{DX: f(0)}, "--dx 0: the grid spacing must be a finite number above 0"},
		{Config{DX: f(math.NaN())}, "--dx NaN"},
		{Config{DX: f(1e-310)}, "--dx 1e-310: too small"},
		{Config{DX: f(math.Inf(1))}, "--dx +Inf"},
		{Config{DX: f(1e308)}, "--dx 1e+308: too large"},
		{Config{Params: map[string]float64{"s": 2}}, "--param: parameters are for a formula (--reduce)"},
		{Config{Reduce: "sumsq", FailOnNonFinite: true}, "--fail-on-nonfinite: it is for a formula in --reduce"},
		{Config{Reduce: "max(v)", Params: map[string]float64{"s": 2}}, `--reduce "max(v)": parameter s is not used`},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%+v: %v, want %q…", c.cfg, err, c.want)
		}
	}
}

func TestSpacing(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	if dx, err := (Config{}).Spacing(5); dx != 0.25 || err != nil {
		t.Errorf("the default spacing of 5 points: %g, %v; want 0.25", dx, err)
	}
	if dx, err := (Config{DX: f(0.1)}).Spacing(5); dx != 0.1 || err != nil {
		t.Errorf("DX 0.1: %g, %v", dx, err)
	}
	if _, err := (Config{A: 1e308, DX: f(1e307)}).Spacing(100); err == nil || !strings.HasPrefix(err.Error(), "--dx 1e+307: the grid's last point") {
		t.Errorf("a grid ending beyond float64: %v", err)
	}
}
