package engine

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/tapeloop/tapeloop/internal/cpus"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// Run places job on d (when it is a DeviceJob) and runs it under d's
// engine configuration.
func (d *Device) Run(ctx context.Context, job Job) (*Outcome, error) {
	if dj, ok := job.(DeviceJob); ok {
		dj.SetDevice(d.op())
	}
	out, err := Run(ctx, job, d.run)
	return out, sysmem.WithFileLimit(err)
}

// WriteDOT plans w on d as a run would, compiles it and writes its graph
// as Graphviz DOT.
func (d *Device) WriteDOT(out io.Writer, w Workload) error {
	if dj, ok := w.(DeviceJob); ok {
		dj.SetDevice(d.op())
	}
	limit := d.run.MemLimit
	if n := len(d.run.Devices); n > 1 {
		limit /= int64(n)
	}
	plan, err := NewPlan(w, limit, d.run.Batch)
	if err != nil {
		return err
	}
	p, err := Compile(w, plan.Batch)
	if err != nil {
		return err
	}
	defer p.Close()
	return WriteDOT(out, w.Name(), p.Graph())
}

// Threads is the number of threads the parallel loops run on now
// (GOMAXPROCS), and why: what decided it at start-up (cpus.Apply: the
// CPUs, SLURM_CPUS_PER_TASK, the cgroup's CPU quota or GOMAXPROCS set by
// the user), and whether it was lowered since to fit an address-space
// limit.
func Threads() cpus.Choice {
	n := runtime.GOMAXPROCS(0)
	c, ok := cpus.Applied()
	switch {
	case !ok:
		return cpus.Choice{Threads: n, Reason: "GOMAXPROCS"}
	case n == c.Threads:
		return c
	case sysmem.FittedFrom() > 0:
		return cpus.Choice{Threads: n, Reason: fmt.Sprintf("lowered from %d (%s) to fit the address-space limit", c.Threads, c.Reason)}
	}
	return cpus.Choice{Threads: n, Reason: fmt.Sprintf("GOMAXPROCS set to %d since: %d were chosen (%s)", n, c.Threads, c.Reason)}
}
