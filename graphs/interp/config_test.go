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

// TestCoarseQueries: float32 and float16 queries are warned about where,
// near the grid, their spacing is above dx/1024 and above what it is at
// the grid's own length from 0; float64 ones never.
func TestCoarseQueries(t *testing.T) {
	for _, c := range []struct {
		a, dx float64
		g     int
		dtype string
		warn  bool
	}{
		{1.7e9, 1, 16, "float32", true},         // spacing 128
		{1e3, 1e-5, 16, "float32", true},        // 6.1e-5: 6 steps
		{-1.7e9, 1, 16, "float32", true},        // either side of zero
		{1.7e9, 1, 16, "float64", false},        // exact enough
		{0, 1.0 / 4095, 4096, "float32", false}, // the built-in grid
		{0, 1, 1 << 20, "float32", false},       // coarse, but so is x − a: nothing to gain
		{-500, 1, 1001, "float32", false},       // centred on 0
		{1, 1e-3, 1001, "float32", false},       // [1, 2]: 2.4e-7 apart, below dx/1024
		{100, 1e-2, 101, "float32", false},      // 7.6e-6 apart, below dx/1024 = 9.8e-6
		{1000, 1e-2, 101, "float32", true},      // 6.1e-5 apart
		{10, 1e-2, 101, "float16", true},        // 2^-7 apart
		{0, 1e-2, 101, "float16", false},
	} {
		msg := CoarseQueries(c.a, c.dx, c.g, c.dtype)
		if (msg != "") != c.warn || strings.Contains(msg, "\n") {
			t.Errorf("a %g, dx %g, G %d, %s: %q, want a warning: %t", c.a, c.dx, c.g, c.dtype, msg, c.warn)
		}
	}
	want := "the queries are float32, 128 apart near this grid (|x| up to 1.7e+09): 128 steps of --dx 1, so each may lie up to 64 steps from the point it was rounded from"
	if msg := CoarseQueries(1.7e9, 1, 16, "float32"); !strings.HasPrefix(msg, want) {
		t.Errorf("%q, want %q…", msg, want)
	}
}
