package main

import (
	"context"
	"reflect"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/option"
)

// flagSamples is a value for each workload flag that differs from its
// default ("" for a boolean flag, given alone).
var flagSamples = map[string]string{
	"a": "0.5", "dx": "0.25", "reduce": "sum", "param": "s=2", "fail-on-nonfinite": "",
	"method": "direct", "metric": "l1", "formula": "sum(a*b)", "topk": "2", "tf32": "", "dtype": "float64",
	"boundary": "wrap", "kernel": "x", "reach": "3", "indexing": "xy", "stat": "l1=sum(abs(g))", "columns": "energy,std",
	"spacing": "2,2,2", "origin": "1,2,3", "frame": "ras", "hu": "", "mu-water": "0.03",
	"mu": "h", "post": "p", "step": "0.5", "strict": "", "filter": "box:3",
}

// checkFlagsCover fails unless every option of the workload's Config
// (cfg, a zero value) has a flag in cmd that, set to a sample value,
// changes that field of the Config that read gives: a Config field
// the command line forgot fails here. read returns the command's spec,
// which holds the Config (embedded or as a field). override replaces
// flagSamples' value for a flag.
func checkFlagsCover(t *testing.T, cmd *cli.Command, cfg any, read func(*cli.Context) (any, error), override map[string]string) {
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
