package drr

import (
	"math"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func num(x float64) *float64 { return &x }

func TestConfigValidate(t *testing.T) {
	workloadtest.RunValidate(t, DefaultConfig, (*Config).Validate, []struct {
		Name string
		Edit func(*Config)
		Want string // "": valid
	}{
		{"default", func(*Config) {}, ""},
		{"trilinear default step", func(c *Config) { c.Method = "trilinear" }, ""},
		{"trilinear step", func(c *Config) { c.Method, c.Step = "trilinear", num(0.25) }, ""},
		{"spacing and origin", func(c *Config) { c.Spacing, c.Origin = &[3]float64{1, 2, 3}, &[3]float64{-1, 0, 1e3} }, ""},
		{"spacing NaN", func(c *Config) { c.Spacing = &[3]float64{1, math.NaN(), 1} }, "--spacing 1,NaN,1: NaN is not a finite number"},
		{"origin infinite", func(c *Config) { c.Origin = &[3]float64{0, math.Inf(1), 0} }, "--origin 0,+Inf,0: +Inf is not a finite number"},
		{"frame ras", func(c *Config) { c.Frame = "ras" }, ""},
		{"frame empty is lps", func(c *Config) { c.Frame = "" }, ""},
		{"frame unknown", func(c *Config) { c.Frame = "RAS" }, `--frame "RAS": want lps or ras`},
		{"mu-water nil is the default", func(c *Config) { c.MuWater = nil }, ""},
		{"mu-water", func(c *Config) { c.MuWater = num(0.03) }, ""},
		{"mu-water 0", func(c *Config) { c.MuWater = num(0) }, "--mu-water 0: must be positive"},
		{"mu-water NaN", func(c *Config) { c.MuWater = num(math.NaN()) }, "--mu-water NaN: must be positive"},
		{"mu and hu", func(c *Config) { c.Mu, c.HU = "h", true }, "--mu and --hu: give one"},
		{"mu and post", func(c *Config) { c.Mu, c.Post = "h/1000", "exp(-p)" }, ""},
		{"mu syntax", func(c *Config) { c.Mu = "h +" }, "--mu"},
		{"post variable", func(c *Config) { c.Post = "h" }, "--post"},
		{"params used", func(c *Config) { c.Post, c.Params = "exp(-s*p)", map[string]float64{"s": 2} }, ""},
		{"params unused", func(c *Config) { c.Params = map[string]float64{"s": 2} }, "--param s: not used by any formula (--mu, --post)"},
		{"fail-on-nonfinite without a formula", func(c *Config) { c.FailOnNonFinite = true }, "--fail-on-nonfinite: it is for --mu or --post"},
		{"fail-on-nonfinite", func(c *Config) { c.FailOnNonFinite, c.Post = true, "log(p)" }, ""},
		{"method", func(c *Config) { c.Method = "joseph" }, `--method "joseph": want siddon or trilinear`},
		{"method empty", func(c *Config) { c.Method = "" }, `--method "": want siddon or trilinear`},
		{"siddon step", func(c *Config) { c.Step = num(1) }, "--step: only --method trilinear samples"},
		{"step 0", func(c *Config) { c.Method, c.Step = "trilinear", num(0) }, "--step 0: must be positive"},
		{"step negative", func(c *Config) { c.Method, c.Step = "trilinear", num(-1) }, "--step -1: must be positive"},
		{"step infinite", func(c *Config) { c.Method, c.Step = "trilinear", num(math.Inf(1)) }, "--step +Inf: must be positive"},
	})
}

// ParseTriple is how the command line reads --spacing and --origin.
func TestParseTriple(t *testing.T) {
	for _, c := range []struct {
		flag, in string
		want     *[3]float64
		err      string
	}{
		{"spacing", "", nil, ""},
		{"spacing", "1, 2,3", &[3]float64{1, 2, 3}, ""},
		{"origin", "-1,0,1e3", &[3]float64{-1, 0, 1e3}, ""},
		{"spacing", "1,2", nil, `--spacing "1,2": want three comma-separated numbers`},
		{"spacing", "1,NaN,1", nil, `--spacing "1,NaN,1": "NaN" is not a finite number`},
		{"origin", "0,0,x", nil, `--origin "0,0,x": "x" is not a finite number`},
		{"origin", "0,inf,0", nil, `"inf" is not a finite number`},
	} {
		got, err := ParseTriple(c.flag, c.in)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("--%s %q: %v", c.flag, c.in, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("--%s %q: error %v, want %q", c.flag, c.in, err, c.err)
		case (got == nil) != (c.want == nil) || got != nil && *got != *c.want:
			t.Errorf("--%s %q: %v, want %v", c.flag, c.in, got, c.want)
		}
	}
}
