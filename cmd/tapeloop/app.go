package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/tapeloop/tapeloop/internal/version"
	"github.com/urfave/cli/v2"
)

func newApp() *cli.App {
	app := &cli.App{
		Name:  "tapeloop",
		Usage: "array workloads as graphs compiled once, replayed per batch, in bounded memory",
		Description: `Each workload is a Gorgonia expression graph built and compiled once into a
TapeMachine, then re-executed batch after batch over preallocated buffers, so
intermediates never accumulate and time per batch stays flat. A memory planner
picks the batch size under --mem-limit.

Outputs appear whole or not at all. A result that cannot be written (standard
output on a full disk or a closed pipe, a profile or report past a size limit)
fails the run: one line on standard error, exit status 1, and no output files
of the run left behind.`,
		Version:              version.String(),
		Writer:               stdout,
		EnableBashCompletion: true,
		// Repeated flags take whole values: a formula may hold commas.
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			demoCommand,
			interpCommand,
			affinityCommand,
			mergeCommand,
			drrCommand,
			registerCommand,
			waveletCommand,
			dotCommand,
			infoCommand,
			plotCommand,
		},
		OnUsageError: usageError,
		// Errors, cli.Exit ones included (the help command's), reach main,
		// which prints them as one line with status 1.
		ExitErrHandler: func(*cli.Context, error) {},
		Before:         func(c *cli.Context) error { return repeatedFlag(c.App, c.Args().Slice()) },
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return fmt.Errorf("unknown command %q (see tapeloop --help)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
	for _, cmd := range app.Commands {
		setUsageError(cmd)
		setFlagChecks(cmd)
		setResultCheck(cmd, "")
	}
	return app
}

// usageError turns a flag parsing error into a plain one-line error
// instead of printing the whole help text.
func usageError(c *cli.Context, err error, _ bool) error {
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		return fmt.Errorf("%s: %w (see tapeloop %s --help)", c.Command.Name, err, c.Command.Name)
	}
	return fmt.Errorf("%w (see tapeloop --help)", err)
}

func setUsageError(cmd *cli.Command) {
	cmd.OnUsageError = usageError
	for _, sub := range cmd.Subcommands {
		setUsageError(sub)
	}
}

// stdout is standard output as every command prints through it: results,
// the wavelet CSV, DOT, tables and help. It keeps the first write error,
// so that a result that did not reach its reader fails the run.
var stdout = &checkedWriter{w: os.Stdout, name: os.Stdout.Name()}

// closedStdout stands for a standard output that was closed when tapeloop
// started: the Go runtime opens /dev/null in its place, where results
// would vanish with exit status 0.
type closedStdout struct{}

var errStdoutClosed = errors.New("standard output is closed")

func (closedStdout) Write([]byte) (int, error) { return 0, errStdoutClosed }

// checkedWriter writes to w and remembers the first error, after which
// every write fails with it. Its errors name the file as name.
type checkedWriter struct {
	mu      sync.Mutex
	w       io.Writer
	name    string
	written bool
	err     error
}

func (w *checkedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.w.Write(p)
	w.written = w.written || n > 0
	if err != nil {
		w.fail(err)
	}
	return n, w.err
}

// fail keeps err, naming the file as w.name: a temporary file's name
// means nothing to the user.
func (w *checkedWriter) fail(err error) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	w.err = fmt.Errorf("write %s: %w", w.name, err)
}

// Err is the first write error, or nil.
func (w *checkedWriter) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close returns the first write error or, when w holds an *os.File that
// was written to, the error of closing it (a network file system may
// report a failed write only then).
func (w *checkedWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if f, ok := w.w.(*os.File); ok && w.written {
		if err := f.Close(); err != nil {
			w.fail(err)
		}
	}
	return w.err
}

// setResultCheck makes cmd and its subcommands fail, naming the command,
// when what they printed to standard output could not be written.
func setResultCheck(cmd *cli.Command, parent string) {
	name := strings.TrimSpace(parent + " " + cmd.Name)
	for _, sub := range cmd.Subcommands {
		setResultCheck(sub, name)
	}
	if cmd.Action == nil {
		return
	}
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		err := action(c)
		werr := stdout.Err()
		if werr == nil || errors.Is(err, werr) && strings.HasPrefix(err.Error(), name+": ") {
			return err // a run's error says what became of its checkpoint
		}
		return fmt.Errorf("%s: %w", name, werr) // the cause, whatever the action made of it

	}
}
