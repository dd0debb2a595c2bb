package main

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

func newApp() *cli.App {
	app := &cli.App{
		Name:  "tapeloop",
		Usage: "array workloads as graphs compiled once, replayed per batch, in bounded memory",
		Description: `Each workload is a Gorgonia expression graph built and compiled once into a
TapeMachine, then re-executed batch after batch over preallocated buffers, so
intermediates never accumulate and time per batch stays flat. A memory planner
picks the batch size under --mem-limit.`,
		Version:              version(),
		EnableBashCompletion: true,
		// Repeated flags take whole values: a formula may hold commas.
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			demoCommand,
			interpCommand,
			affinityCommand,
			mergeCommand,
			drrCommand,
			waveletCommand,
			dotCommand,
			infoCommand,
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

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
