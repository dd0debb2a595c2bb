package option

import "testing"

type cfgA struct {
	DX              *float64           `json:"dx" flag:"dx"`
	Params          map[string]float64 `json:"params" flag:"param"`
	FailOnNonFinite bool               `json:"fail_on_nonfinite" flag:"fail-on-nonfinite"`
	Rows            int                `json:"rows"`
}

type cfgB struct {
	cfgA
	MuWater *float64 `json:"mu_water" flag:"mu-water"`
}

func TestFieldsWalkEmbeddedStructs(t *testing.T) {
	got := Fields(cfgB{})
	want := []Field{{Go: "DX", Flag: "dx", Key: "dx"}, {Go: "Params", Flag: "param", Key: "params"},
		{Go: "FailOnNonFinite", Flag: "fail-on-nonfinite", Key: "fail_on_nonfinite"}, {Go: "Rows", Key: "rows"},
		{Go: "MuWater", Flag: "mu-water", Key: "mu_water"}}
	if len(got) != len(want) {
		t.Fatalf("%d fields, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Go != want[i].Go || got[i].Flag != want[i].Flag || got[i].Key != want[i].Key {
			t.Errorf("field %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestKeywordsRewriteOnlyKnownFlags(t *testing.T) {
	names := Names(map[string]string{"f": "f"}, cfgB{})
	for _, c := range []struct{ in, want string }{
		{`--dx 1e-400: too small; use --dtype float64`, `dx= 1e-400: too small; use --dtype float64`},
		{`--param s: not used by any formula (--reduce)`, `params= s: not used by any formula (--reduce)`},
		{`--fail-on-nonfinite: it is for a formula`, `fail_on_nonfinite=: it is for a formula`},
		{`--f: the table has shape (5,)`, `f=: the table has shape (5,)`},
		{`--mu-water 0 and --mu: give one`, `mu_water= 0 and --mu: give one`},
		{`a formula "a--dx" is kept`, `a formula "a--dx" is kept`},
	} {
		if got := Keywords(c.in, names); got != c.want {
			t.Errorf("Keywords(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestNamesRefusesOneFlagWithTwoKeys(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("--dx mapped to dx and to spacing: no panic")
		}
	}()
	Names(map[string]string{"dx": "spacing"}, cfgA{})
}

func TestFieldsResult(t *testing.T) {
	type cfg struct {
		A      float64 `flag:"a" json:"a"`
		Strict bool    `flag:"strict" json:"strict" fingerprint:"-"`
	}
	got := Fields(cfg{})
	if !got[0].Result || got[1].Result {
		t.Errorf("Result %v, %v: want true for a, false for the field tagged fingerprint:\"-\"", got[0].Result, got[1].Result)
	}
}

func TestFlagReadsHelpDefaultEnv(t *testing.T) {
	type cfg struct {
		Device string `flag:"device" json:"device" default:"cpu" env:"X_DEVICE" help:"where to run"`
	}
	f := Flag(cfg{}, "device")
	if f.Go != "Device" || f.Key != "device" || f.Default != "cpu" || f.Env != "X_DEVICE" || f.Help != "where to run" {
		t.Errorf("Flag: %+v", f)
	}
	defer func() {
		if recover() == nil {
			t.Error("a flag no field has does not panic")
		}
	}()
	Flag(cfg{}, "nope")
}
