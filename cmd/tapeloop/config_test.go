package main

import (
	"context"
	"reflect"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/graphs/register"
)

// flagSamples is a value for each workload flag that differs from its
// default ("" for a boolean flag, given alone).
var flagSamples = map[string]string{
	"a": "0.5", "dx": "0.25", "reduce": "sum", "param": "s=2", "fail-on-nonfinite": "",
	"method": "direct", "metric": "l1", "formula": "sum(a*b)", "topk": "2", "tf32": "", "dtype": "float64",
	"boundary": "wrap", "kernel": "x", "reach": "3", "indexing": "xy", "stat": "l1=sum(abs(g))", "columns": "energy,std",
	"spacing": "2,2,2", "origin": "1,2,3", "frame": "ras", "hu": "", "mu-water": "0.03",
	"mu": "h", "post": "p", "step": "0.5", "strict": "", "filter": "box:3",
	"loss": "mse", "patch": "8", "levels": "2", "max-steps": "5", "tolerance": "0.01", "accept": "0.5",
}

// checkFlagsCover fails unless every option of the workload's Config
// (cfg, a zero value) has a flag in cmd that, set to a sample value,
// changes that field of the Config that read gives: a Config field
// the command line forgot fails here. read returns the command's spec,
// which holds the Config (embedded or as a field). override replaces
// flagSamples' value for a flag.
func checkFlagsCover(t *testing.T, cmd *cli.Command, cfg any, read func(*cli.Context) (any, error), override map[string]string) {
	t.Helper()
	checkFlagsCoverBut(t, cmd, cfg, read, override, nil)
}

// checkFlagsCoverBut is checkFlagsCover but for the options whose flags
// absent lists, each with the reason cmd does not have it; an option
// listed that cmd has fails.
func checkFlagsCoverBut(t *testing.T, cmd *cli.Command, cfg any, read func(*cli.Context) (any, error), override, absent map[string]string) {
	t.Helper()
	config := func(args ...string) reflect.Value {
		t.Helper()
		var spec any
		var err error
		c := &cli.Command{Name: cmd.Name, Flags: cmd.Flags, Action: func(c *cli.Context) error {
			spec, err = read(c)
			return nil
		}}
		app := &cli.App{Commands: []*cli.Command{c}, ExitErrHandler: func(*cli.Context, error) {}}
		if runErr := app.RunContext(context.Background(), append([]string{"tapeloop", cmd.Name}, args...)); runErr != nil {
			t.Fatalf("%v: %v", args, runErr)
		}
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		v := reflect.ValueOf(spec)
		for v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		want := reflect.TypeOf(cfg)
		for i := range v.NumField() {
			if v.Field(i).Type() == want {
				return v.Field(i)
			}
		}
		t.Fatalf("the %s spec %T holds no %v", cmd.Name, spec, want)
		return reflect.Value{}
	}
	base := config()
	fields := option.Fields(cfg)
	if len(fields) == 0 {
		t.Fatalf("%T has no options", cfg)
	}
	for _, f := range fields {
		if f.Flag == "" {
			t.Errorf("%T.%s has no flag tag (flag:\"-\" for an option the command line sets otherwise)", cfg, f.Go)
			continue
		}
		if f.Flag == "-" {
			continue
		}
		if _, ok := absent[f.Flag]; ok {
			if hasFlagNamed(cmd.Flags, f.Flag) {
				t.Errorf("%T.%s: the %s command has --%s, listed as absent", cfg, f.Go, cmd.Name, f.Flag)
			}
			continue
		}
		if !hasFlagNamed(cmd.Flags, f.Flag) {
			t.Errorf("%T.%s: the %s command has no --%s", cfg, f.Go, cmd.Name, f.Flag)
			continue
		}
		sample, ok := override[f.Flag]
		if !ok {
			if sample, ok = flagSamples[f.Flag]; !ok {
				t.Errorf("--%s: add a sample value to flagSamples", f.Flag)
				continue
			}
		}
		args := []string{"--" + f.Flag}
		if sample != "" {
			args = append(args, sample)
		}
		got := config(args...).FieldByName(f.Go)
		if reflect.DeepEqual(got.Interface(), base.FieldByName(f.Go).Interface()) {
			t.Errorf("%s --%s %s leaves %T.%s at %v", cmd.Name, f.Flag, sample, cfg, f.Go, got)
		}
	}
}

func hasFlagNamed(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// Every option of register.Config has a register flag that sets it, and
// every option of the DRR it renders has one but those listed.
func TestRegisterFlagsCoverConfig(t *testing.T) {
	read := func(c *cli.Context) (any, error) { return registerSpec(c) }
	checkFlagsCover(t, registerCommand, register.Config{}, read, nil)
	checkFlagsCoverBut(t, registerCommand, drr.Config{}, func(c *cli.Context) (any, error) {
		s, err := registerSpec(c)
		return s.DRR, err
	}, map[string]string{"method": "siddon"}, map[string]string{
		"post":              "the loss compares line integrals",
		"filter":            "the loss compares line integrals",
		"fail-on-nonfinite": "no formula of the images",
		"strict":            "a registration moves the volume: its geometry's faults are not the user's",
	})
}

// readConfig fills each field from the flag its tag names, by its kind;
// pointers only when the flag is given; what it cannot read, what the
// command lacks and what it is told to skip stay as they were.
func TestReadConfig(t *testing.T) {
	type name string
	type config struct {
		S     string             `flag:"s"`
		N     name               `flag:"n"`
		B     bool               `flag:"b"`
		I     int                `flag:"i"`
		F     float64            `flag:"f"`
		L     []string           `flag:"l"`
		PF    *float64           `flag:"pf"`
		PI    *int               `flag:"pi"`
		PS    *string            `flag:"ps"`
		M     map[string]float64 `flag:"m"`
		T     *[3]float64        `flag:"t"`
		Split []string           `flag:"split"`
		Skip  string             `flag:"skip"`
		None  string             `flag:"none"`
		Dash  string             `flag:"-"`
		Plain string
	}
	flags := []cli.Flag{
		&cli.StringFlag{Name: "s", Value: "s0"}, &cli.StringFlag{Name: "n", Value: "n0"}, &cli.BoolFlag{Name: "b"},
		&cli.IntFlag{Name: "i", Value: 3}, &cli.Float64Flag{Name: "f", Value: 0.5}, &cli.StringSliceFlag{Name: "l"},
		&cli.Float64Flag{Name: "pf", Value: 2}, &cli.IntFlag{Name: "pi", Value: 4}, &cli.StringFlag{Name: "ps", Value: "p0"},
		&cli.StringSliceFlag{Name: "m"}, &cli.StringFlag{Name: "t"}, &cli.StringFlag{Name: "split"}, &cli.StringFlag{Name: "skip", Value: "k"},
	}
	parse := func(args ...string) config {
		t.Helper()
		keep := "kept"
		cfg := config{M: map[string]float64{"x": 1}, T: &[3]float64{1, 2, 3}, Split: []string{keep}, Skip: keep, None: keep, Dash: keep, Plain: keep}
		app := &cli.App{Commands: []*cli.Command{{Name: "x", Flags: flags, Action: func(c *cli.Context) error {
			readConfig(c, &cfg, "skip")
			return nil
		}}}, ExitErrHandler: func(*cli.Context, error) {}}
		if err := app.RunContext(context.Background(), append([]string{"tapeloop", "x"}, args...)); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return cfg
	}
	kept := func(c config) bool {
		return c.M["x"] == 1 && *c.T == [3]float64{1, 2, 3} && len(c.Split) == 1 && c.Split[0] == "kept" && c.Skip == "kept" &&
			c.None == "kept" && c.Dash == "kept" && c.Plain == "kept"
	}
	got := parse()
	if got.S != "s0" || got.N != "n0" || got.B || got.I != 3 || got.F != 0.5 || got.L != nil || got.PF != nil || got.PI != nil || got.PS != nil || !kept(got) {
		t.Errorf("defaults: %+v", got)
	}
	got = parse("--s", "a", "--n", "b", "--b", "--i", "7", "--f", "1.5", "--l", "u", "--l", "v", "--pf", "2", "--pi", "9", "--ps", "q",
		"--m", "y=2", "--t", "4,5,6", "--split", "c,d", "--skip", "z")
	if got.S != "a" || got.N != "b" || !got.B || got.I != 7 || got.F != 1.5 || !reflect.DeepEqual(got.L, []string{"u", "v"}) ||
		got.PF == nil || *got.PF != 2 || got.PI == nil || *got.PI != 9 || got.PS == nil || *got.PS != "q" || !kept(got) {
		t.Errorf("set: %+v", got)
	}
}

// The options readConfig does not read keep their own rules: DRR's
// μ_water is its flag's default when not given; affinity's --metric is
// its default only without --formula, its --method "" unless given.
func TestConfigSpecExceptions(t *testing.T) {
	run := func(cmd *cli.Command, read func(*cli.Context), args ...string) {
		t.Helper()
		app := &cli.App{Commands: []*cli.Command{{Name: cmd.Name, Flags: cmd.Flags, Action: func(c *cli.Context) error {
			read(c)
			return nil
		}}}, ExitErrHandler: func(*cli.Context, error) {}}
		if err := app.RunContext(context.Background(), append([]string{"tapeloop", cmd.Name}, args...)); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	run(drrCommand, func(c *cli.Context) {
		s, err := drrSpec(c)
		if err != nil || s.MuWater == nil || *s.MuWater != drr.DefaultMuWater || s.Step != nil || s.Spacing != nil {
			t.Errorf("drr: %+v, %v", s.Config, err)
		}
	})
	for _, c := range []struct {
		args           []string
		metric, method string
	}{{nil, "dot", ""}, {[]string{"--formula", "sum(a*b)"}, "", ""}, {[]string{"--formula", "sum(a*b)", "--metric", "l1", "--method", "direct"}, "l1", "direct"}} {
		run(affinityCommand, func(ctx *cli.Context) {
			s, err := affinitySpec(ctx)
			if err != nil || s.Metric != c.metric || s.Method != c.method || s.Dtype != "float32" || s.TopK != nil {
				t.Errorf("affinity %v: %+v, %v", c.args, s.Config, err)
			}
		}, c.args...)
	}
}
