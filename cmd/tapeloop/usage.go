package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// Flag rules the flag parser does not know: a flag given twice with two
// values (the parser would keep the last one silently), a flag that the
// command would ignore because of another, and stray arguments.

// repeatedFlag refuses a value flag given twice with different values on
// the command line args (a command, its subcommand for dot, then flags).
func repeatedFlag(app *cli.App, args []string) error {
	if len(args) == 0 {
		return nil
	}
	cmd := app.Command(args[0])
	if cmd == nil {
		return nil // the app says it is unknown
	}
	name, rest := cmd.Name, args[1:]
	if len(cmd.Subcommands) > 0 && len(rest) > 0 {
		if sub := cmd.Command(rest[0]); sub != nil {
			cmd, name, rest = sub, name+" "+sub.Name, rest[1:]
		}
	}
	flags := map[string]cli.Flag{}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			flags[n] = f
		}
	}
	seen := map[cli.Flag]string{}
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break // flags end here, as in the parser
		}
		n, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, ok := flags[n]
		if !ok {
			continue // unknown: the parser says so
		}
		if _, isBool := f.(*cli.BoolFlag); isBool {
			continue // saying it twice says the same
		}
		if _, isList := f.(*cli.StringSliceFlag); isList {
			continue // repeatable: option.ParseParams refuses a name given twice
		}
		if !hasValue {
			if i+1 >= len(rest) {
				break // the parser says the value is missing
			}
			i++
			value = rest[i]
		}
		if prev, ok := seen[f]; ok && prev != value {
			return fmt.Errorf("%s: --%s given twice (%q, then %q): give it once", name, f.Names()[0], prev, value)
		}
		seen[f] = value
	}
	return nil
}

// ignoredWith lists, per command, flags that only apply without another
// flag: given together, one of them would be silently ignored.
var ignoredWith = map[string][]struct {
	flags []string
	with  string
	why   string
}{
	"interp": {
		{[]string{"interpolants", "grid"}, "f", "the table's shape gives M and G"},
		{[]string{"points", "seed"}, "x", "its file gives the queries"},
	},
	"affinity": {
		{[]string{"n", "height", "width", "seed"}, "images", "its file gives the images"},
		{[]string{"metric", "tf32"}, "formula", "the formula is the affinity"},
	},
	"drr": {
		{[]string{"size"}, "volume", "--size is the built-in phantom's"},
		{[]string{"orbit", "sdd", "sid", "detector", "pixel", "isocenter", "start", "axis"}, "geometry", "its file gives the poses"},
	},
	"wavelet": {{[]string{"size", "seed"}, "volume", "--size and --seed make the built-in volume"}},
}

// needsVolume lists the DRR flags that describe a --volume file.
var needsVolume = []string{"shape", "dtype", "hu", "order"}

// checkCommandFlags refuses stray arguments and flags the command would
// ignore. It runs before the command's action (cli.Command.Before).
func checkCommandFlags(c *cli.Context) error {
	name := c.Command.Name
	if l := c.Lineage(); len(l) > 1 && l[1].Command != nil && l[1].Command.Name != "" && l[1].Command.Name != c.App.Name {
		name = l[1].Command.Name + " " + name // dot's workloads
	}
	if c.Args().Present() {
		return fmt.Errorf("%s: unexpected argument %q", name, c.Args().First())
	}
	if err := emptyFlag(c, name); err != nil {
		return err
	}
	for _, r := range ignoredWith[c.Command.Name] {
		if !c.IsSet(r.with) {
			continue
		}
		for _, f := range r.flags {
			if c.IsSet(f) {
				return fmt.Errorf("%s: --%s is not used with --%s (%s): give one or the other", name, f, r.with, r.why)
			}
		}
	}
	if c.Command.Name == "drr" && !c.IsSet("volume") {
		for _, f := range needsVolume {
			if c.IsSet(f) {
				return fmt.Errorf("%s: --%s describes a --volume file, and there is none", name, f)
			}
		}
	}
	return nil
}

// emptyFlag refuses a flag that names a file or directory (a StringFlag
// with TakesFile: the one mark of a path flag) given as "": an unset
// shell variable (--volume "$CT") would otherwise mean the built-in data,
// or no output at all. Any other string flag given as "" or blanks is
// refused too (--mu "$MU" would otherwise render without the user's
// attenuation, --origin "$O" at the default origin), except those also
// read from the environment, where an exported but empty variable is
// common and means the default.
func emptyFlag(c *cli.Context, name string) error {
	for _, f := range c.Command.Flags {
		sf, ok := f.(*cli.StringFlag)
		if !ok || !c.IsSet(sf.Name) {
			continue
		}
		switch v := c.String(sf.Name); {
		case sf.TakesFile && v == "":
			return fmt.Errorf("%s: --%s: empty path: name a file or directory, or leave the flag out", name, sf.Name)
		case !sf.TakesFile && len(sf.EnvVars) == 0 && strings.TrimSpace(v) == "":
			return fmt.Errorf("%s: --%s: empty value: give one, or leave the flag out", name, sf.Name)
		}
	}
	return nil
}

// setFlagChecks installs checkCommandFlags on every command that takes no
// arguments (all but merge and dot itself), subcommands included, and on
// merge the check of empty values.
func setFlagChecks(cmd *cli.Command) {
	for _, sub := range cmd.Subcommands {
		setFlagChecks(sub)
	}
	switch {
	case len(cmd.Subcommands) > 0:
	case cmd.ArgsUsage == "":
		cmd.Before = checkCommandFlags
	default:
		cmd.Before = func(c *cli.Context) error { return emptyFlag(c, c.Command.Name) }
	}
}
