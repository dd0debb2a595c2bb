package main

import (
	"fmt"
	"os"
	"runtime"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/fft3"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

var infoCommand = &cli.Command{
	Name:  "info",
	Usage: "show the machine, memory and backends tapeloop sees",
	Action: func(c *cli.Context) error {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "tapeloop\t%s\n", version())
		fmt.Fprintf(tw, "go\t%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		fmt.Fprintf(tw, "cpus\t%d (GOMAXPROCS %d)\n", runtime.NumCPU(), runtime.GOMAXPROCS(0))
		if a, err := sysmem.Available(); err == nil {
			fmt.Fprintf(tw, "memory available\t%s\n", sysmem.Format(a))
		}
		if l, err := graphs.DefaultMemLimit(); err == nil {
			fmt.Fprintf(tw, "default --mem-limit\t%s\n", sysmem.Format(l))
		}
		fmt.Fprintf(tw, "blas\tnone linked: matrix products and distances run on tapeloop's own kernels\n")
		fmt.Fprintf(tw, "pairwise kernels\t%s (C, cgo, chosen at run time)\n", cpukern.PairDistISA())
		fmt.Fprintf(tw, "fft\ttapeloop's own, float32, %s (C, cgo, chosen at run time)\n", fft3.ISA())
		fmt.Fprintf(tw, "cuda\t%s\n", cudaInfo)
		return tw.Flush()
	},
}
