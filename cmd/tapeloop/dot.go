package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/internal/filejob"
)

var dotCommand = &cli.Command{
	Name:      "dot",
	Usage:     "print a workload's compiled graph as Graphviz DOT",
	ArgsUsage: "WORKLOAD [workload flags]",
	Description: `Builds the workload's graph exactly as a run would (same flags, same planned
batch) and prints it as a Graphviz digraph; each node is labelled with its op,
shape, dtype and buffer bytes. Render with: tapeloop dot interp | dot -Tsvg > interp.svg`,
	Subcommands: []*cli.Command{
		{
			Name:  "interp",
			Usage: "the interpolation graph",
			Flags: append(append([]cli.Flag{}, interpFlags...), engineFlags...),
			Action: func(c *cli.Context) error {
				_, dev, err := openEngine(c)
				if err != nil {
					return err
				}
				spec, err := interpSpec(c)
				if err != nil {
					return err
				}
				t, err := filejob.OpenInterp(spec, dev, false)
				if err != nil {
					return err
				}
				defer t.Close()
				return dev.WriteDOT(stdout, t.Job())
			},
		},
		{
			Name:  "drr",
			Usage: "the DRR graph",
			Flags: append(append([]cli.Flag{}, drrFlags...), withoutDtype(engineFlags)...),
			Action: func(c *cli.Context) error {
				_, dev, err := openEngine(c)
				if err != nil {
					return err
				}
				spec, err := drrSpec(c)
				if err != nil {
					return err
				}
				t, err := filejob.OpenDRR(spec, dev, false)
				if err != nil {
					return err
				}
				defer t.Close()
				return dev.WriteDOT(stdout, t.Job())
			},
		},
		{
			Name:  "wavelet",
			Usage: "the wavelet-sweep graph",
			Flags: append(append([]cli.Flag{}, waveletFlags...), withoutDtype(engineFlags)...),
			Action: func(c *cli.Context) error {
				_, dev, err := openEngine(c)
				if err != nil {
					return err
				}
				spec, err := waveletSpec(c)
				if err != nil {
					return err
				}
				t, err := filejob.OpenWavelet(spec, dev, false)
				if err != nil {
					return err
				}
				defer t.Close()
				return dev.WriteDOT(stdout, t.Job())
			},
		},
		{
			Name:  "affinity",
			Usage: "the pairwise-affinity graph",
			Flags: append(append([]cli.Flag{}, affinityFlags...), withoutDtype(engineFlags)...),
			Action: func(c *cli.Context) error {
				_, dev, err := openEngine(c)
				if err != nil {
					return err
				}
				spec, err := affinitySpec(c)
				if err != nil {
					return err
				}
				t, err := filejob.OpenAffinity(spec, dev, false)
				if err != nil {
					return err
				}
				defer t.Close()
				return t.Device().WriteDOT(stdout, t.Job())
			},
		},
	},
	Action: func(c *cli.Context) error {
		if c.Args().Present() {
			return fmt.Errorf("dot: unknown workload %q", c.Args().First())
		}
		return errNoWorkload
	},
}

var errNoWorkload = errors.New("dot: name a workload, e.g. tapeloop dot interp")
