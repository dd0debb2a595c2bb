package option

import (
	"reflect"
	"regexp"
	"strings"
)

// Field is one option of a Config: its Go field name, its flag (without
// the dashes) and its JSON key, which is also its Python keyword.
type Field struct {
	Go, Flag, Key string
	Type          reflect.Type
	// Result is whether the option can change a run's results, so that a
	// shard or checkpoint must record it: every option but those tagged
	// fingerprint:"-" (an option that only turns a warning into an
	// error, say).
	Result bool
	// Help, Default and Env are the tags help, default and env: the
	// flag's usage text, its default as the command line shows it ("":
	// none shown, or the Config's own default) and the environment
	// variable that sets it ("": none). Arg (the tag arg) is the name
	// the help gives the flag's value, e.g. sx,sy,sz: the command line
	// shows it as the value's placeholder.
	Help, Default, Env, Arg string
}

// Fields lists the options of cfg, a Config struct or a pointer to one,
// in field order; embedded structs contribute their fields. A field
// tagged flag:"-" has no flag of its own (its value comes from several
// flags, or from an argument of the CLI).
func Fields(cfg any) []Field {
	t := reflect.TypeOf(cfg)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []Field
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, Fields(reflect.New(f.Type).Interface())...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, Field{Go: f.Name, Flag: f.Tag.Get("flag"), Key: key, Type: f.Type, Result: f.Tag.Get("fingerprint") != "-",
			Help: f.Tag.Get("help"), Default: f.Tag.Get("default"), Env: f.Tag.Get("env"), Arg: f.Tag.Get("arg")})
	}
	return out
}

// Flag is the field of cfg (as Fields lists them) whose flag is name; a
// name no field has is a mistake in the caller and panics.
func Flag(cfg any, name string) Field {
	for _, f := range Fields(cfg) {
		if f.Flag == name {
			return f
		}
	}
	panic("option: no field has the flag --" + name)
}

// Names maps flags to keywords: the options of each of cfgs, and extra
// pairs (flag, keyword) for the arguments a front end names itself. A
// flag given two different keywords is a mistake in the tags and panics
// (a test of each front end calls Names).
func Names(extra map[string]string, cfgs ...any) map[string]string {
	m := map[string]string{}
	add := func(flag, key string) {
		if flag == "" || flag == "-" || key == "" || key == "-" {
			return
		}
		if k, ok := m[flag]; ok && k != key {
			panic("option: --" + flag + " is both " + k + " and " + key)
		}
		m[flag] = key
	}
	for _, c := range cfgs {
		for _, f := range Fields(c) {
			add(f.Flag, f.Key)
		}
	}
	for f, k := range extra {
		add(f, k)
	}
	return m
}

// flagRef is a flag named in a message: "--" at the start or after a
// character that cannot end a word ("a--dx" in a formula is not a flag).
var flagRef = regexp.MustCompile(`(^|[^\w-])--([a-z][a-z0-9-]*)`)

// Keywords rewrites each option named as a flag in msg (--dx, --param) as
// the keyword names maps it to (dx=, params=); flags names does not hold
// are left as they are.
func Keywords(msg string, names map[string]string) string {
	return flagRef.ReplaceAllStringFunc(msg, func(s string) string {
		m := flagRef.FindStringSubmatch(s)
		if k, ok := names[m[2]]; ok {
			return m[1] + k + "="
		}
		return s
	})
}

// OrDefault is s, or def when s is empty.
func OrDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
