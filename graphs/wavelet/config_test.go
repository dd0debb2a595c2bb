package wavelet

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

func TestConfigValidate(t *testing.T) {
	workloadtest.RunValidate(t, DefaultConfig, (*Config).Validate, []struct {
		Name string
		Edit func(*Config)
		Want string // "": valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"wrap", func(c *Config) { c.Boundary = "wrap" }, ""},
		{"boundary empty is reflect", func(c *Config) { c.Boundary = "" }, ""},
		{"boundary", func(c *Config) { c.Boundary = "mirror" }, `--boundary: unknown boundary "mirror"`},
		{"boundary first", func(c *Config) { c.Boundary, c.A = "mirror", 0 }, "--boundary"},
		{"a zero", func(c *Config) { c.A = 0 }, "--a 0: wavelet: scale a = 0 must be positive"},
		{"a negative", func(c *Config) { c.A = -1 }, "--a -1: "},
		{"a infinite", func(c *Config) { c.A = math.Inf(1) }, "--a +Inf: wavelet: scale a = +Inf"},
		{"a NaN", func(c *Config) { c.A = math.NaN() }, "--a NaN: "},
		{"kernel", func(c *Config) { c.Kernel = "(3 - q)*exp(-q/2)*s"; c.Params = map[string]float64{"s": 2} }, ""},
		{"kernel reduces", func(c *Config) { c.Kernel = "q - mean(q)" }, "--kernel"},
		{"kernel unknown name", func(c *Config) { c.Kernel = "g" }, "--kernel"},
		{"stats", func(c *Config) { c.Stats = []string{"l1=sum(abs(g))", "e2=sum(g^2)"} }, ""},
		{"stat without name", func(c *Config) { c.Stats = []string{"sum(g)"} }, `--stat "sum(g)": want name=formula`},
		{"stat empty formula", func(c *Config) { c.Stats = []string{"s= "} }, "want name=formula"},
		{"stat bad name", func(c *Config) { c.Stats = []string{"2x=sum(g)"} }, `the name "2x" is not a name`},
		{"stat name of a parameter's column", func(c *Config) { c.Stats = []string{"theta=sum(g^2)"} }, `--stat "theta=sum(g^2)": theta is taken by a built-in column; give the statistic another name`},
		{"stat named energy", func(c *Config) { c.Stats = []string{"energy=sum(g^2)"} }, `--stat "energy=sum(g^2)": energy is taken by a built-in column`},
		{"stat named std", func(c *Config) { c.Stats = []string{"l1=sum(abs(g))", "std = sum(g)"} }, "std is taken by a built-in column"},
		{"stat named max", func(c *Config) { c.Stats = []string{"max=max(g)"} }, "max is taken by a built-in column"},
		{"stat named wavelet_energy", func(c *Config) { c.Stats = []string{"wavelet_energy=sum(g)"} }, "wavelet_energy is taken by a built-in column"},
		{"stat named like a column left out", func(c *Config) { c.Stats, c.Columns = []string{"max=max(g)"}, []string{"std"} }, "max is taken by a built-in column"},
		{"stat named phi", func(c *Config) { c.Stats = []string{"phi=sum(g)"} }, "phi is taken by a built-in column"},
		{"stat named xi", func(c *Config) { c.Stats = []string{"xi=sum(g)"} }, "xi is taken by a built-in column"},
		{"stat twice", func(c *Config) { c.Stats = []string{"e=sum(g)", "e=max(g)"} }, `--stat "e=max(g)": e is taken by another statistic; give each statistic its own name`},
		{"stat twice with spaces", func(c *Config) { c.Stats = []string{"e=sum(g)", " e =max(g)"} }, "e is taken by another statistic"},
		{"stat not reducing", func(c *Config) { c.Stats = []string{"s=g^2"} }, "--stat s"},
		{"parameter unused", func(c *Config) { c.Params = map[string]float64{"s": 2} }, "--param s: not used by any formula"},
		{"fail on nonfinite with a stat", func(c *Config) { c.Stats, c.FailOnNonFinite = []string{"m=max(g)"}, true }, ""},
		{"fail on nonfinite alone: for the combinations without a kernel", func(c *Config) { c.FailOnNonFinite = true }, ""},
		{"columns", func(c *Config) { c.Columns = []string{"std", " energy"} }, ""},
		{"columns theta and a statistic's name", func(c *Config) { c.Columns, c.Stats = []string{"theta", "l1", "max"}, []string{"l1=sum(abs(g))"} }, ""},
		{"columns unknown", func(c *Config) { c.Columns = []string{"energy", "mean"} }, `--columns: unknown column "mean"; want some of energy, std, max, wavelet_energy`},
		{"columns empty list", func(c *Config) { c.Columns = []string{} }, "--columns: empty list"},
		{"columns empty name", func(c *Config) { c.Columns = []string{"energy", ""} }, "--columns: an empty name"},
		{"columns twice", func(c *Config) { c.Columns = []string{"std", "std "} }, "--columns: std is named twice"},
		{"columns a statistic not given", func(c *Config) { c.Columns = []string{"l1"} }, `--columns: unknown column "l1"`},
	})
}

// TestParsedCanonical: the formulas a shard's fingerprint holds, the
// kernel's first, with their parameters, in a form that does not depend
// on the spaces they are written with.
func TestParsedCanonical(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kernel, cfg.Stats, cfg.Params = "(3  - q)*exp(-q/2)*s", []string{" l1 =  sum(abs(g))", "m=max(g)"}, map[string]float64{"s": 2}
	p, err := cfg.Parse()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Kernel, cfg.Stats = "(3 - q)*exp(-q/2)*s", []string{"l1=sum(abs(g))", "m=max(g)"}
	q, err := cfg.Parse()
	if err != nil {
		t.Fatal(err)
	}
	got, want := p.Canonical(), q.Canonical()
	if len(got) != 3 || strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.HasPrefix(got[1], "l1=") || !strings.Contains(got[0], "s=2") {
		t.Errorf("canonical %q and %q, want the same three, the kernel's first with s=2", got, want)
	}
	if c, _ := DefaultConfig().Parse(); len(c.Canonical()) != 0 {
		t.Errorf("no formulas: %q", c.Canonical())
	}
}

// TestStatNamesTaken: a statistic may not take the name of any column the
// sweep writes itself, the built-in statistics' (every one, written or
// not) and theta, phi, xi, nor the name of another statistic; any other
// name is a column of its own after the built-in ones.
func TestStatNamesTaken(t *testing.T) {
	taken := append([]string{"theta", "phi", "xi"}, BuiltinColumns[:]...)
	for _, name := range taken {
		for _, cols := range [][]string{nil, {"std"}} {
			cfg := DefaultConfig()
			cfg.Stats, cfg.Columns = []string{"l1=sum(abs(g))", name + "=sum(g^2)"}, cols
			want := fmt.Sprintf("--stat %q: %s is taken by a built-in column; give the statistic another name", name+"=sum(g^2)", name)
			if err := cfg.Validate(); err == nil || err.Error() != want {
				t.Errorf("--stat %s=… with --columns %q: %v, want %q", name, cols, err, want)
			}
		}
	}
	cfg := DefaultConfig()
	cfg.Stats = []string{"l1=sum(abs(g))", "L1=sum(g)", "l1=max(abs(g))"}
	want := `--stat "l1=max(abs(g))": l1 is taken by another statistic; give each statistic its own name`
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("l1 twice: %v, want %q", err, want)
	}
	cfg.Stats = []string{"energy2=sum(g^2)", "Energy=sum(g^2)", "std_g=sum(g)", "maxg=max(g)"}
	p, err := cfg.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(p.statNames, ","), "energy2,Energy,std_g,maxg"; got != want {
		t.Errorf("statistics %q, want %q", got, want)
	}
}
