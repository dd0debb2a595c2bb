package graphs

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/tapeloop/tapeloop/internal/checkpoint"
)

// openCheckpoint opens the checkpoint of the output out for a run with
// header h whose finished work takes total records of what. With resume it
// reads the checkpoint there, refusing a missing one or one of another
// run, and passes its records to restore; without, it refuses to replace
// a checkpoint holding finished work, and starts a new one.
func openCheckpoint(out string, h checkpoint.Header, resume bool, total int, what string, restore func([]byte) error) (*checkpoint.File, error) {
	path := checkpoint.Path(out)
	if resume {
		c, err := checkpoint.Resume(path, h, total, what, restore)
		if err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		return c, nil
	}
	n, err := checkpoint.Count(path)
	switch {
	case err == nil && n > 0:
		return nil, fmt.Errorf("--out %s: %s holds %d finished %s of an earlier run: continue it with --resume, or remove it to start over", out, path, n, what)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("--out %s: %w: remove it to start over", out, err)
	}
	c, err := checkpoint.Create(path, h, total, what)
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	return c, nil
}

// removeCheckpoint removes *c, if any, once its run's outputs are in place.
func removeCheckpoint(c **checkpoint.File) error {
	if *c == nil {
		return nil
	}
	err := (*c).Remove()
	*c = nil
	return err
}

// closeCheckpoint closes *c, if any; it stays on disk when it holds
// finished work.
func closeCheckpoint(c **checkpoint.File) error {
	if *c == nil {
		return nil
	}
	err := (*c).Close()
	*c = nil
	return err
}

// unfinished is err, the error that ended a run, with what its checkpoint
// c (nil: none) holds and how to continue: an interrupted run says only
// that.
func unfinished(workload string, err error, c *checkpoint.File) error {
	if c == nil || c.Saved() == 0 {
		return err
	}
	if errors.Is(err, ErrInterrupted) {
		return fmt.Errorf("%s: %w: %s", workload, ErrInterrupted, c.Note())
	}
	return fmt.Errorf("%w; %s", err, c.Note())
}

// StopNotes closes the open checkpoints, waiting for a write in progress
// to end, and says what each holds and how to continue: for a process
// stopped by a signal, just before it exits.
func StopNotes() []string { return checkpoint.CloseAll() }
