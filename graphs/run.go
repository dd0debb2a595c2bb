package graphs

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/internal/telemetry"
)

// Job is a Workload that also supplies its batches and takes its results.
type Job interface {
	Workload
	// Feed fills the first n rows of the inputs with items [off, off+n).
	Feed(in []*tensor.Dense, off, n int) error
	// Consume takes the first n rows of the outputs: items [off, off+n).
	Consume(out []*tensor.Dense, off, n int) error
}

// Finisher is implemented by Jobs with work to do after the last batch
// (assembling or writing results); Run calls Finish before it returns.
type Finisher interface {
	Finish() error
}

// RunConfig is the engine's configuration, filled from the CLI flags.
type RunConfig struct {
	MemLimit int64     // bytes the planned buffers may take; 0: DefaultMemLimit
	Batch    int       // batch size; 0: planned
	Verbose  bool      // print the plan to Log
	Progress bool      // draw a progress bar on Log once a run lasts over a second
	Log      io.Writer // plan and progress; nil: discard
	// DeviceBytes, when set, reads the GPU memory in use; each batch's
	// record then carries it.
	DeviceBytes func() int64
}

// Outcome is what a run measured.
type Outcome struct {
	Plan       Plan
	Summary    telemetry.Summary
	Iterations []telemetry.Iteration
}

// DefaultMemLimit is half of the memory available to this process.
func DefaultMemLimit() (int64, error) {
	a, err := sysmem.Available()
	if err != nil {
		return 0, err
	}
	return max(a/2, 1), nil
}

// Run plans job under cfg, compiles it once, and feeds, runs and consumes
// every batch in order, recording each batch's time, heap and RSS. It stops
// between batches when ctx is done.
func Run(ctx context.Context, job Job, cfg RunConfig) (*Outcome, error) {
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	limit := cfg.MemLimit
	if limit == 0 {
		var err error
		if limit, err = DefaultMemLimit(); err != nil {
			return nil, err
		}
	}
	plan, err := NewPlan(job, limit, cfg.Batch)
	if err != nil {
		return nil, err
	}
	if cfg.Verbose {
		plan.Print(log)
	}
	prog, err := Compile(job, plan.Batch)
	if err != nil {
		return nil, err
	}
	defer prog.Close()

	rec := telemetry.NewRecorder(plan.Batches)
	rec.DeviceBytes = cfg.DeviceBytes
	var bar *progressbar.ProgressBar
	began := time.Now()
	items := plan.Items
	for off := 0; off < items; off += plan.Batch {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: stopped after %d of %d items: %w", job.Name(), off, items, err)
		}
		n := min(plan.Batch, items-off)
		rec.Start()
		if err := job.Feed(prog.Inputs(), off, n); err != nil {
			return nil, err
		}
		if err := prog.Pad(n); err != nil {
			return nil, err
		}
		if _, err := prog.Run(); err != nil {
			return nil, err
		}
		if err := job.Consume(prog.Outputs(), off, n); err != nil {
			return nil, err
		}
		rec.Stop()
		if cfg.Progress && bar == nil && time.Since(began) > time.Second && off+n < items {
			bar = progressbar.NewOptions(items,
				progressbar.OptionSetWriter(log),
				progressbar.OptionSetDescription(job.Name()),
				progressbar.OptionShowCount(),
				progressbar.OptionThrottle(200*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
		}
		if bar != nil {
			bar.Set(off + n)
		}
	}
	if bar != nil {
		bar.Finish()
	}
	if f, ok := job.(Finisher); ok {
		if err := f.Finish(); err != nil {
			return nil, fmt.Errorf("%s: %w", job.Name(), err)
		}
	}
	s := rec.Close()
	return &Outcome{Plan: plan, Summary: s, Iterations: rec.Iterations}, nil
}
