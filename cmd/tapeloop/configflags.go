package main

import (
	"reflect"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/tapeloop/tapeloop/graphs/option"
)

// readConfig sets the options of cfg, a pointer to a Config, from the
// running command's flags, each field from the flag its flag tag names
// (option.Fields): a string, bool, int or float64 field from its
// String, Bool, Int or Float64 flag, always (its default when not
// given); a []string from its StringSlice flag; a *float64, *int or
// *string only when the flag is given (c.IsSet), else it is left as it
// was. A field whose flag the command does not define, whose flag is in
// skip, or whose type and flag do not match those (a *[3]float64 parsed
// from a string, the map of --param, a list split from one string) is
// left as it was, for the caller to read.
func readConfig(c *cli.Context, cfg any, skip ...string) {
	v := reflect.ValueOf(cfg).Elem()
	for _, o := range option.Fields(cfg) {
		if o.Flag == "" || o.Flag == "-" || slices.Contains(skip, o.Flag) {
			continue
		}
		fl := commandFlag(c, o.Flag)
		if fl == nil {
			continue
		}
		f := v.FieldByName(o.Go)
		t := f.Type()
		if t.Kind() == reflect.Pointer {
			if !c.IsSet(o.Flag) {
				continue
			}
			p := reflect.New(t.Elem())
			if setFlagValue(c, fl, p.Elem()) {
				f.Set(p)
			}
			continue
		}
		setFlagValue(c, fl, f)
	}
}

// setFlagValue sets f to the value of fl, a flag of the running command,
// where f's kind matches fl's type, and reports whether it did.
func setFlagValue(c *cli.Context, fl cli.Flag, f reflect.Value) bool {
	name := fl.Names()[0]
	switch fl.(type) {
	case *cli.StringFlag:
		if f.Kind() == reflect.String {
			f.SetString(c.String(name))
			return true
		}
	case *cli.BoolFlag:
		if f.Kind() == reflect.Bool {
			f.SetBool(c.Bool(name))
			return true
		}
	case *cli.IntFlag:
		if f.Kind() == reflect.Int {
			f.SetInt(int64(c.Int(name)))
			return true
		}
	case *cli.Float64Flag:
		if f.Kind() == reflect.Float64 {
			f.SetFloat(c.Float64(name))
			return true
		}
	case *cli.StringSliceFlag:
		if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String {
			f.Set(reflect.ValueOf(c.StringSlice(name)).Convert(f.Type()))
			return true
		}
	}
	return false
}

// commandFlag is the running command's flag named name, or nil.
func commandFlag(c *cli.Context, name string) cli.Flag {
	if c.Command == nil {
		return nil
	}
	for _, f := range c.Command.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}
