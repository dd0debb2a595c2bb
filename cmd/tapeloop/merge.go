package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/internal/filejob"
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
shard, or shards of two workloads, is refused and nothing is written; the
refusal names every missing shard.

--check, instead of --out, only reads the shards' metadata and lists every
missing shard, every shard held by more than one file (with the files) and
every file of another run, then the --array= list that resubmits the
missing shards of a SLURM array (the task number is the shard, e.g.
sbatch --array=3,7 job.sh). It writes nothing; its exit status is 0 when
the set is complete and 1 when it is not.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "out", TakesFile: true, Usage: "the merged `FILE` (DRR shards: a directory)"},
		&cli.BoolFlag{Name: "check", Usage: "list the missing and duplicated shards and the --array= list to resubmit; write nothing, exit 1 unless complete"},
	},
	Action: func(c *cli.Context) error {
		spec := filejob.MergeSpec{Out: c.String("out"), Shards: c.Args().Slice(), Check: c.Bool("check")}
		if err := spec.Validate(); err != nil {
			return err
		}
		if !spec.Check {
			return filejob.Merge(spec)
		}
		r, err := filejob.CheckShards(spec)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(stdout, strings.Join(r.Lines(), "\n")); err != nil {
			return err
		}
		if !r.OK() {
			return fmt.Errorf("merge --check: the shards are not a complete set (%d missing, %d duplicated, %d not of the run)", len(r.Missing), len(r.Dups), len(r.Problems))
		}
		return nil
	},
}
