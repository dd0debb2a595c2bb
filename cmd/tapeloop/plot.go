package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/internal/plot"
)

var plotCommand = &cli.Command{
	Name:      "plot",
	Usage:     "draw a report, wavelet CSV, affinity matrix, DRR stack or registration trace as PNG or SVG",
	ArgsUsage: "FILE",
	Description: `Draws FILE, telling what it holds from its extension and content:

  report.json   a --report of any workload: time per batch and resident memory
                over the run, with the drift and --mem-limit marked
  sweep.csv     tapeloop wavelet's CSV: --column (default energy) over θ × φ,
                one heatmap per ξ on one colour scale
  A.npy         an affinity matrix (N, N): the matrix as an image (means of
                blocks of cells past 400 a side)
  top.npz       an affinity --topk file: the histogram of the neighbour values
  drr.npy       a stack of DRRs (poses, rows, columns): a contact sheet, one
                gray image per pose (at most 64, evenly spread)
  trace.csv     tapeloop register's trace: the loss, rotation vector and
                translation over the steps, a dashed line where a level begins
  times.csv     columns series,iteration,seconds: one line per series, in
                milliseconds (a log scale where the medians differ more than
                a hundredfold); series named "W a", "W b" share a colour;
                --title sets its title

The figure goes to --out, .png or .svg, whole or not at all.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "out", TakesFile: true, Usage: "write the figure to `FILE`, .png or .svg"},
		&cli.StringFlag{Name: "column", Usage: "a wavelet CSV's statistic to draw: energy, std, max, wavelet_energy or a --stat column (default: energy)"},
		&cli.StringFlag{Name: "title", Usage: "a times CSV's figure title (default: time per iteration)"},
		&cli.StringFlag{Name: "size", Usage: "the figure's `WxH`, pixels (PNG) or points (SVG) (default: each figure's own)"},
	},
	Action: func(c *cli.Context) error {
		cfg, in, err := plotConfig(c)
		if err != nil {
			return err
		}
		if err := plot.Draw(in, cfg); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		return nil
	},
}

// plotConfig reads the plot command's argument and flags. The flags may
// follow FILE (tapeloop plot FILE --out FIG.png): the CLI library stops
// at the first argument, so what follows it is parsed here.
func plotConfig(c *cli.Context) (plot.Config, string, error) {
	if c.NArg() == 0 {
		return plot.Config{}, "", fmt.Errorf("plot: no FILE to draw (see tapeloop plot --help)")
	}
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range c.Command.Flags {
		if err := f.Apply(fs); err != nil {
			return plot.Config{}, "", err
		}
	}
	if err := repeatedAfter(c, c.Args().Tail()); err != nil {
		return plot.Config{}, "", err
	}
	if err := fs.Parse(c.Args().Tail()); err != nil {
		return plot.Config{}, "", fmt.Errorf("plot: %w (see tapeloop plot --help)", err)
	}
	if fs.NArg() > 0 {
		return plot.Config{}, "", fmt.Errorf("plot: one FILE at a time: %q is another", fs.Arg(0))
	}
	late := map[string]bool{}
	var empty error
	fs.Visit(func(f *flag.Flag) {
		late[f.Name] = true
		if strings.TrimSpace(f.Value.String()) == "" && empty == nil {
			what := "empty value"
			if f.Name == "out" {
				what = "empty path"
			}
			empty = fmt.Errorf("plot: --%s: %s", f.Name, what)
		}
	})
	if empty != nil {
		return plot.Config{}, "", empty
	}
	get := func(name string) string {
		if late[name] {
			return fs.Lookup(name).Value.String()
		}
		return c.String(name)
	}
	cfg := plot.Config{Out: get("out"), Column: get("column"), Title: get("title")}
	if cfg.Out == "" {
		return cfg, "", fmt.Errorf("plot: --out FIG.png or FIG.svg is required")
	}
	if s := get("size"); s != "" {
		w, h, ok := strings.Cut(s, "x")
		wi, werr := strconv.Atoi(w)
		hi, herr := strconv.Atoi(h)
		if !ok || werr != nil || herr != nil || wi < 16 || hi < 16 || wi > 10000 || hi > 10000 {
			return cfg, "", fmt.Errorf("plot: --size %q: want WxH, e.g. 800x600, each from 16 to 10000", s)
		}
		cfg.Width, cfg.Height = wi, hi
	}
	return cfg, c.Args().First(), nil
}

// repeatedAfter refuses a flag given twice where one is after FILE: twice
// after it, or before and after it (the CLI refuses those given twice
// before it).
func repeatedAfter(c *cli.Context, tail []string) error {
	names := map[string]string{} // each name of a flag → its first name
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			names[n] = f.Names()[0]
		}
	}
	seen := map[string]string{}
	for i := 0; i < len(tail); i++ {
		a := tail[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			continue
		}
		n, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		name, ok := names[n]
		if !ok {
			continue // unknown: the parser says so
		}
		if !hasValue && i+1 < len(tail) {
			i++
			value = tail[i]
		}
		first, twice := seen[name]
		if !twice && c.IsSet(name) {
			first, twice = c.String(name), true
		}
		if twice {
			return fmt.Errorf("plot: --%s given twice (%q, then %q): give it once", name, first, value)
		}
		seen[name] = value
	}
	return nil
}
