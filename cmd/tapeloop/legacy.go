package main

// TEMPORARY during the move of the workloads' set-up into package graphs:
// the commands not yet moved use these.

import (
	"os"

	"github.com/urfave/cli/v2"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/graphs"
	"github.com/tapeloop/tapeloop/ops"
)

type legacy struct {
	engine
	gdev  *graphs.Device
	dev   ops.Device
	dtype tensor.Dtype
	run   graphs.RunConfig
}

func legacyConfig(c *cli.Context) (legacy, error) {
	e, d, err := openEngine(c)
	if err != nil {
		return legacy{}, err
	}
	return legacy{engine: e, gdev: d, dev: d.LegacyOp(), dtype: d.Dtype(), run: d.RunConfig()}, nil
}

type jobTask struct {
	job    graphs.Job
	result func() any
}

func (t jobTask) Job() graphs.Job { return t.job }
func (t jobTask) Result() any     { return t.result() }
func (t jobTask) Commit() error   { return nil }
func (t jobTask) Close() error    { return nil }

func runJob(e legacy, job graphs.Job, result func() any) (*graphs.Outcome, error) {
	return runTask(e.engine, e.gdev, jobTask{job, result})
}

func printDOT(e legacy, w graphs.Workload) error { return e.gdev.WriteDOT(os.Stdout, w) }
