// Command tapeloop runs array workloads (interpolation, DRR rendering,
// wavelet sweeps, pairwise affinities) as Gorgonia graphs compiled once and
// replayed batch after batch, with memory planned under a limit.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintln(os.Stderr, "tapeloop: "+msg)
		os.Exit(1)
	}
}
