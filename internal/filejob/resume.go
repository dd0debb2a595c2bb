package filejob

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// claim is the checkpoint of a run's output, locked for the run: what a
// resumed run will restore from it, or the new one it will start.
type claim struct {
	lock  *checkpoint.Lock
	saved *checkpoint.Saved // with --resume
	path  string
	h     checkpoint.Header
	what  string
	warn  func(string)
}

// claimCheckpoint locks the checkpoint of the output out, for a run with
// header h of items [0, items) of what, refusing at once when another
// run holds it. With resume it reads the checkpoint there (prefix: only
// the items before the first one missing count, for outputs written in
// item order), refusing a missing one or one of another run; without, it
// refuses to replace a checkpoint holding finished work. warn (nil: none)
// hears of records skipped.
func claimCheckpoint(out string, h checkpoint.Header, resume bool, items int, prefix bool, what string, warn func(string)) (_ *claim, err error) {
	path := checkpoint.Path(out)
	lock, err := checkpoint.Take(path)
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", out, err)
	}
	defer func() {
		if err != nil {
			lock.Release()
		}
	}()
	c := &claim{lock: lock, path: path, h: h, what: what, warn: warn}
	if resume {
		if c.saved, err = checkpoint.Scan(path, h, items, prefix); err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		return c, nil
	}
	other, n, err := checkpoint.Inspect(path)
	switch {
	case err == nil && n > 0:
		if other.OtherShard(h) {
			return nil, fmt.Errorf("--out %s: %s holds %d finished %s of another shard: %s", out, path, n, what, other.OtherShardAdvice(h))
		}
		if other != h {
			return nil, fmt.Errorf("--out %s: %s holds %d finished items of another %s run (other inputs, flags or shard), which this one cannot continue: remove it to start over, or choose another --out", out, path, n, other.Workload)
		}
		return nil, fmt.Errorf("--out %s: %s holds %d finished %s of an earlier run: continue it with --resume, or remove it to start over", out, path, n, what)
	case err != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.EACCES)):
		return nil, fmt.Errorf("--out %s: %w", out, err) // the checkpoint may be fine: say only what failed
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("--out %s: %w: remove it to start over", out, err)
	}
	return c, nil
}

// lockOutput locks the output out of a run without a checkpoint, refusing
// at once when another run writes it.
func lockOutput(out string) (*checkpoint.Lock, error) {
	l, err := checkpoint.Take(checkpoint.Path(out))
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", out, err)
	}
	return l, nil
}

// Saved is the number of items a resumed run restores.
func (c *claim) Saved() int {
	if c == nil || c.saved == nil {
		return 0
	}
	return c.saved.Len()
}

// open restores the saved items with restore, in the order to write them,
// and opens the checkpoint to append to, or starts a new one; total is
// the number of records the finished run has.
func (c *claim) open(total int, restore func(item int, payload []byte) error) (*checkpoint.File, error) {
	if c.saved == nil {
		f, err := checkpoint.Create(c.path, c.h, total, c.what)
		if err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		return f, nil
	}
	if n := c.saved.Unused; n > 0 && c.warn != nil {
		c.warn(fmt.Sprintf("%s: %d records skipped (cut short, garbled, repeated, of another run, or after a missing one); their %s are computed again", c.path, n, c.what))
	}
	f, err := c.saved.Restore(total, c.what, restore)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	return f, nil
}

// release unlocks the checkpoint; a no-op on nil.
func (c *claim) release() {
	if c != nil {
		c.lock.Release()
	}
}

// checkpointSpace is the disk space the records of items more items of
// payload bytes each take.
func checkpointSpace(items, payload int) int64 {
	return sysmem.Mul(int64(items), checkpoint.FrameBytes(payload))
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
	if errors.Is(err, engine.ErrInterrupted) {
		return fmt.Errorf("%s: %w: %s", workload, engine.ErrInterrupted, c.Note())
	}
	return fmt.Errorf("%w; %s", err, c.Note())
}

// StopNotes closes the open checkpoints, waiting for a write in progress
// to end, and says what each holds and how to continue: for a process
// stopped by a signal, just before it exits.
func StopNotes() []string { return checkpoint.CloseAll() }
