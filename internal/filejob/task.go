package filejob

import (
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/engine"
)

// Task is a workload opened from its spec: inputs open and checked, output
// files created as temporary files beside their final names, the job ready
// to plan. Run it with Device.Run, then Commit; Close releases everything
// and removes outputs that were not committed.
type Task interface {
	// Job is the workload to run.
	Job() engine.Job
	// Result summarises the run so far, for reports.
	Result() any
	// Commit flushes the outputs and renames them into place.
	Commit() error
	// Close closes the inputs and removes uncommitted outputs.
	Close() error
}

// A PhasedTask is a Task whose Result times the phases of its run, the
// writing of its outputs in Commit included: a report staged before
// Commit (so that a report that cannot be written fails the run before
// any output is in place) is staged again after it, with the phases
// complete.
type PhasedTask interface {
	Task
	PhasesChange() bool
}

// RemovePending removes the temporary files of outputs not yet committed,
// and the directories made for them: for a process stopped by a signal,
// just before it exits.
func RemovePending() { atomicfile.RemovePending() }
