package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
)

var demoCommand = &cli.Command{
	Name:  "demo",
	Usage: "run every workload on built-in synthetic data at CPU-friendly sizes and print one table",
	Description: `Runs each workload on built-in data (the four cases, scaled to finish in
seconds on 2 cores) and prints, per workload: size, batches, median ms per batch,
drift (last-decile/first-decile median batch time), Go heap growth from the
first batch to the last, peak RSS and the result. With --device cuda (the GPU
build) every workload runs on the GPU, or spread over --devices.`,
	Flags: []cli.Flag{memLimitFlag, deviceFlag, devicesFlag},
	Action: func(c *cli.Context) error {
		if c.Args().Present() {
			return fmt.Errorf("demo: unexpected argument %q", c.Args().First())
		}
		_, dev, err := openEngine(c)
		if err != nil {
			return err
		}
		ctx := c.Context
		if dev.GPU() {
			fmt.Fprintf(stdout, "on %s\n", dev.Name)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "workload\tsize\tbatches\tms/batch\tdrift\theap growth\tpeak RSS\tresult")
		for _, d := range filejob.DemoCases() {
			out, res, err := d.Run(ctx, dev)
			if err != nil {
				return fmt.Errorf("demo %s: %w", d.Workload, err)
			}
			s := out.Summary
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.3f\t%s\t%s\t%s\n", d.Workload, d.Size, s.Batches, s.MedianMs, s.Drift,
				engine.FormatBytes(s.HeapGrowth), engine.FormatBytes(s.PeakRSSBytes), res)
		}
		return tw.Flush()
	},
}
