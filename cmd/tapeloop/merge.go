package main

import (
	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs"
)

var mergeCommand = &cli.Command{
	Name:      "merge",
	Usage:     "assemble the shards of an affinity, wavelet or DRR run into its output",
	ArgsUsage: "SHARD.npz…",
	Description: `Reads the shards' workload from the files and checks that they cover every
row, combination or pose exactly once and come from the same run (input,
parameters, formulas), then writes what one unsharded run writes, byte for
byte: for affinity shards the (N, N) matrix to --out (.npy), or for top-k
shards the indices and values (.npz); for wavelet shards the CSV to --out;
for DRR shards drr.npy (or the files the shards' --format names: drr.npy,
drr.mha, drr.tiff), geometry.json and, if the shards were run with --png,
the PNGs into the directory --out. A missing, duplicated, overlapping or foreign
shard, or shards of two workloads, is refused and nothing is written.`,
	Flags: []cli.Flag{&cli.StringFlag{Name: "out", TakesFile: true, Required: true, Usage: "the merged `FILE` (DRR shards: a directory)"}},
	Action: func(c *cli.Context) error {
		spec := graphs.MergeSpec{Out: c.String("out"), Shards: c.Args().Slice()}
		if err := spec.Validate(); err != nil {
			return err
		}
		return graphs.Merge(spec)
	},
}
