package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/engine"
)

// usageOf is the usage text of the flag name among flags, and whether it
// is there.
func usageOf(flags []cli.Flag, name string) (string, bool) {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			if d, ok := f.(cli.DocGenerationFlag); ok {
				return d.GetUsage(), true
			}
		}
	}
	return "", false
}

// TestConfigFlagsFromTags: the flags of drr.Config's options and of the
// engine's settings carry the help their fields' tags give, written
// nowhere else; every option of drr.Config but those the commands share
// (--param, --fail-on-nonfinite) and --filter, whose help lists the
// filters, has it.
func TestConfigFlagsFromTags(t *testing.T) {
	shared := map[string]bool{"param": true, "fail-on-nonfinite": true, "filter": true}
	for _, c := range []struct {
		cfg   any
		flags []cli.Flag
	}{{drr.Config{}, drrCommand.Flags}, {engine.Settings{}, engineFlags}} {
		for _, f := range option.Fields(c.cfg) {
			if f.Flag == "" || f.Flag == "-" || shared[f.Flag] {
				continue
			}
			if f.Help == "" {
				t.Errorf("%T.%s: no help tag", c.cfg, f.Go)
				continue
			}
			want := f.Help
			if f.Arg != "" {
				want = strings.Replace(want, f.Arg, "`"+f.Arg+"`", 1)
			}
			got, ok := usageOf(c.flags, f.Flag)
			if !ok || got != want {
				t.Errorf("--%s: usage %q, want its tag's %q", f.Flag, got, want)
			}
		}
	}
	if deviceFlag.Value != "cpu" || dtypeFlag.Value != "float32" || len(deviceFlag.EnvVars) != 1 || deviceFlag.EnvVars[0] != "TAPELOOP_DEVICE" {
		t.Errorf("--device %q %v, --dtype %q", deviceFlag.Value, deviceFlag.EnvVars, dtypeFlag.Value)
	}
}
