package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/affinity"
	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/graphs/interp"
	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/graphs/register"
	"github.com/tapeloop/tapeloop/graphs/wavelet"
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

// TestConfigFlagsFromTags: the flags of the workloads' options and of the
// engine's settings carry the help their fields' tags give, written
// nowhere else; every option has it but those the commands share
// (--param, --fail-on-nonfinite) and DRR's --filter, whose help lists the
// filters.
func TestConfigFlagsFromTags(t *testing.T) {
	shared := map[string]bool{"param": true, "fail-on-nonfinite": true, "filter": true}
	for _, c := range []struct {
		cfg   any
		flags []cli.Flag
	}{{drr.Config{}, drrCommand.Flags}, {engine.Settings{}, engineFlags}, {wavelet.Config{}, waveletCommand.Flags},
		{interp.Config{}, interpCommand.Flags}, {affinity.Config{}, affinityCommand.Flags},
		{register.Config{}, registerCommand.Flags}} {
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
	// Defaults shown: the Config's own, or its default tag.
	for _, c := range []struct {
		flags      []cli.Flag
		name, want string
	}{{waveletCommand.Flags, "a", "1"}, {waveletCommand.Flags, "indexing", "ij"}, {interpCommand.Flags, "reduce", "sumsq"},
		{affinityCommand.Flags, "metric", "dot"}, {drrCommand.Flags, "method", "siddon"}, {drrCommand.Flags, "mu-water", "0.02"}} {
		for _, f := range c.flags {
			if d, ok := f.(cli.DocGenerationFlag); ok && slices.Contains(f.Names(), c.name) && strings.Trim(d.GetDefaultText(), `"`) != c.want {
				t.Errorf("--%s: default %q, want %q", c.name, d.GetDefaultText(), c.want)
			}
		}
	}
}
