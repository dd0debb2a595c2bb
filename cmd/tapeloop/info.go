package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/urfave/cli/v2"
)

var infoCommand = &cli.Command{
	Name:  "info",
	Usage: "show the machine, memory and backends tapeloop sees",
	Action: func(c *cli.Context) error {
		if c.Args().Present() {
			return fmt.Errorf("info: unexpected argument %q", c.Args().First())
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "tapeloop\t%s\n", version())
		for _, l := range engine.Info() {
			fmt.Fprintf(tw, "%s\t%s\n", l.Key, l.Value)
		}
		return tw.Flush()
	},
}
