package affinity

import (
	"strings"
	"testing"
)

// TestConfigValidate: the rules on the options alone, each error naming
// the option as the command line does (capi and Python rewrite the flags
// as their keywords).
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string // "": valid
	}{
		{"zero", Config{}, ""},
		{"every metric", Config{Metric: "l2"}, ""},
		{"metric", Config{Metric: "l3"}, `--metric: unknown metric "l3"`},
		{"formula", Config{Formula: "exp(-sum((a-b)^2)/(2*s^2))", Params: map[string]float64{"s": 2}, Method: "direct", FailOnNonFinite: true}, ""},
		{"metric and formula", Config{Metric: "dot", Formula: "sum(a*b)"}, "--metric and --formula: give one"},
		{"bad formula", Config{Formula: "-sum(abs(a-c))"}, "--formula"},
		{"method", Config{Formula: "sum(a*b)", Method: "fast"}, `--method "fast": want auto or direct`},
		{"method without a formula", Config{Method: "direct"}, "--method and --fail-on-nonfinite: they are for a --formula, and none is given"},
		{"fail-on-nonfinite without a formula", Config{FailOnNonFinite: true}, "--method and --fail-on-nonfinite: they are for a --formula"},
		{"params without a formula", Config{Params: map[string]float64{"s": 1}}, "--param: parameters are for a formula (--formula), and none is given"},
		{"unused param", Config{Formula: "sum(a*b)", Params: map[string]float64{"s": 1}}, `--formula "sum(a*b)": parameter s is not used`},
		{"tf32", Config{TF32: true}, ""},
		{"tf32 with a formula", Config{Formula: "sum(a*b)", TF32: true}, "--tf32: not used with --formula"},
		{"K", Config{TopK: intp(3)}, ""},
		{"K 0", Config{TopK: intp(0)}, "--topk 0: must be at least 1"},
		{"K negative", Config{TopK: intp(-1)}, "--topk -1: must be at least 1"},
		{"metric before K", Config{Metric: "x", TopK: intp(0)}, "--metric"},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one beginning %q", c.name, err, c.want)
		}
	}
}

// TestFormulaThatIsABuiltin: a formula that is a built-in metric as
// written (up to spaces, parentheses, the order of a − b and x^2 for x·x)
// runs as the metric; one that only resembles it, or asked for with
// --method direct, stays a formula.
func TestFormulaThatIsABuiltin(t *testing.T) {
	cases := []struct {
		src, method string
		want        string // the metric, "": a formula
	}{
		{"-sum(abs(a-b))", "", "l1"},
		{" - sum( abs( b - a ) ) ", "", "l1"},
		{"-sum((a-b)^2)", "", "l2"},
		{"-sum((b - a)*(b - a))", "", "l2"},
		{"sum(a*b)", "", "dot"},
		{"sum(b*a)", "auto", "dot"},
		{"sum(a*b)/sqrt(sum(a^2)*sum(b^2))", "", "cosine"},
		{"sum(a*b)/(sqrt(sum(a*a))*sqrt(sum(b*b)))", "", "cosine"},
		{"-sum(abs(a-b))", "direct", ""},
		{"sum(abs(a-b))", "", ""},
		{"-2*sum(abs(a-b))", "", ""},
		{"-sum(abs(a-b))/s", "", ""},
		{"sqrt(sum((a-b)^2))", "", ""},
		{"sum(a*b) + 1", "", ""},
		{"-mean(abs(a-b))", "", ""},
	}
	for _, c := range cases {
		cfg := Config{Formula: c.src, Method: c.method}
		if strings.HasSuffix(c.src, "/s") {
			cfg.Params = map[string]float64{"s": 1}
		}
		p, err := cfg.Parse()
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		switch {
		case c.want == "" && (p.Formula == nil || p.Builtin != ""):
			t.Errorf("%q (method %q): runs as the built-in %v, want the formula", c.src, c.method, p.Metric)
		case c.want != "" && (p.Formula != nil || p.Metric.String() != c.want || p.Builtin == ""):
			t.Errorf("%q: formula %v, metric %v; want the built-in %s", c.src, p.Formula != nil, p.Metric, c.want)
		}
	}
}
