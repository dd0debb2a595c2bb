// Command tapeloop runs array workloads (interpolation, DRR rendering,
// wavelet sweeps, pairwise affinities) as Gorgonia graphs compiled once and
// replayed batch after batch, with memory planned under a limit.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/filejob"
	_ "github.com/tapeloop/tapeloop/internal/startup" // a tiny ulimit -n refused before start-up fails
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// stopGrace is how long a run has, after SIGINT, SIGTERM or SIGHUP, to stop by
// itself (between batches, or inside an op's next block of work) before
// the process removes its pending outputs, closes its checkpoints (their
// finished batches are on disk already) and exits.
const stopGrace = 800 * time.Millisecond

func main() {
	// A write past the file size limit (ulimit -f) and a write to a closed
	// pipe return errors (EFBIG, EPIPE) instead of ending the process, so
	// that the run ends as every failed write does: its pending outputs
	// removed, one line on stderr, exit status 1.
	signal.Ignore(syscall.SIGXFSZ, syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	stops := []os.Signal{os.Interrupt, syscall.SIGTERM}
	// SIGHUP (the terminal or ssh session closed) stops a run as SIGTERM
	// does, its checkpoint kept and its temporary files and locks removed;
	// a run started with SIGHUP ignored (nohup) keeps ignoring it.
	if !signal.Ignored(syscall.SIGHUP) {
		stops = append(stops, syscall.SIGHUP)
	}
	signal.Notify(sigs, stops...)
	go func() {
		s := <-sigs
		cancel()
		select {
		case <-time.After(stopGrace):
		case <-sigs:
		}
		saved := "nothing was written"
		if notes := filejob.StopNotes(); len(notes) > 0 { // before RemovePending: an empty checkpoint goes, and its directory with it
			saved = strings.Join(notes, "; ")
		}
		filejob.RemovePending()
		name := "SIGTERM"
		switch s {
		case os.Interrupt:
			name = "SIGINT"
		case syscall.SIGHUP:
			name = "SIGHUP"
		}
		fmt.Fprintf(os.Stderr, "tapeloop: stopped by %s; %s\n", name, saved)
		os.Exit(1)
	}()
	err := newApp().RunContext(ctx, os.Args)
	if werr := stdout.Close(); werr != nil && err == nil { // the help text, or a result written but not stored
		err = werr
	}
	if errors.Is(err, atomicfile.ErrStopped) {
		// The signal's handler has removed what the run was writing and
		// is printing its one line ("stopped by SIGTERM; nothing was
		// written") on its way to exit: that line, not this error, is
		// the run's last word.
		select {}
	}
	if err != nil {
		err = sysmem.WithFileLimit(err) // "too many open files" says the limit
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintln(os.Stderr, "tapeloop: "+msg)
		// A registration that ran to its end without converging has its
		// own status (every other error, the CLI library's exit codes
		// included, is 1).
		var nc *filejob.NotConverged
		if errors.As(err, &nc) {
			os.Exit(nc.ExitCode())
		}
		os.Exit(1)
	}
}
