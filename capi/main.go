// Command capi is tapeloop's C ABI, built as a shared library for the
// Python package (go build -buildmode=c-shared -o
// python/tapeloop/libtapeloop.so ./capi, which make python and
// python/setup.py run).
//
// Every function returns NULL on success or an error message the caller
// frees with tl_free; a message that begins "interrupted: " says the call
// was stopped by SIGINT (see runWatched) or tl_interrupt. Handles are
// positive integers. A caller's buffers are read and written only during
// the call that receives them and are never kept. Calls on one handle take
// turns; what a call reports comes back through its own arguments. A Go
// panic becomes an error; nothing exits the process.
package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/internal/cpus"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/telemetry"
	"github.com/tapeloop/tapeloop/internal/version"
)

// The threads the calls run on, as the command's: the CPUs the process
// may run on, lowered to SLURM_CPUS_PER_TASK and the cgroup's CPU quota,
// unless GOMAXPROCS is set in the environment.
func init() { cpus.Apply() }

// Version is the ABI's version: the Python package checks it.
const Version = "tapeloop-capi 6"

func main() {}

// program is what every compiled workload offers besides its own Run.
type program interface {
	Close() error
	Interrupt()
	DOT() (string, error)
	Report() engine.Report
}

// object is one compiled workload behind a handle; turn serializes its
// calls: it holds a token while a call has the object (lock, unlock), and
// a call that SIGINT stops waits for it in a way a SIGINT ends
// (lockWatched). sigMu guards watched (a call that SIGINT stops is in
// progress) and seq0 (the SIGINTs taken before it began; see runWatched);
// stops counts tl_interrupt's requests. Whatever a call reports besides
// its error (a DRR's warnings) goes back through its own arguments, taken
// while it has the object: nothing about one call is kept for another to
// read.
type object struct {
	turn    chan struct{}
	closed  bool
	prog    program
	sigMu   sync.Mutex
	watched bool
	seq0    uint32
	stops   atomic.Int64
}

var (
	objMu   sync.Mutex
	objects = map[int64]*object{}
	nextID  int64
)

func register(p program) int64 {
	objMu.Lock()
	defer objMu.Unlock()
	nextID++
	objects[nextID] = &object{prog: p, turn: make(chan struct{}, 1)}
	return nextID
}

// lock waits for o's turn; unlock ends it.
func (o *object) lock()   { o.turn <- struct{}{} }
func (o *object) unlock() { <-o.turn }

// usable refuses a call on o, handle h, once it is closed; the caller has
// the object's turn.
func (o *object) usable(h C.int64_t) error {
	if o.closed {
		return fmt.Errorf("handle %d: closed", h)
	}
	return nil
}

func lookup(h C.int64_t) (*object, error) {
	objMu.Lock()
	defer objMu.Unlock()
	o, ok := objects[int64(h)]
	if !ok {
		return nil, fmt.Errorf("handle %d: no such object (closed?)", h)
	}
	return o, nil
}

// call runs f on the program behind h, of type P, in the object's turn
// (after the calls on it from other threads); with interruptible, SIGINT
// during f, or while it waits for its turn, stops it (see runWatched).
func call[P program](h C.int64_t, what string, interruptible C.int, f func(P) error) error {
	o, err := lookup(h)
	if err != nil {
		return err
	}
	p, ok := o.prog.(P)
	if !ok {
		return fmt.Errorf("handle %d: not %s", h, what)
	}
	run := func() error { return f(p) }
	if interruptible != 0 && take() {
		return runWatched(o, h, run)
	}
	o.lock()
	defer o.unlock()
	if err := o.usable(h); err != nil {
		return err
	}
	return runPlain(o, run)
}

// guard runs f, turning its error or panic into a C string for the caller
// to free (NULL: no error).
func guard(f func() error) (msg *C.char) {
	defer func() {
		if r := recover(); r != nil {
			msg = C.CString(fmt.Sprintf("internal error (a bug in tapeloop): %v", r))
		}
	}()
	if err := f(); err != nil {
		if errors.Is(err, engine.ErrInterrupted) {
			return C.CString("interrupted: " + keywords(err.Error()))
		}
		return C.CString(keywords(err.Error()))
	}
	return nil
}

// decode reads a JSON config into v, refusing unknown fields.
func decode(cfg *C.char, v any) error {
	if cfg == nil {
		return fmt.Errorf("config: NULL")
	}
	raw := []byte(C.GoString(cfg))
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" { // the whole config
				return fmt.Errorf("config: want a JSON object of options, got %s", te.Value)
			}
			return typeError(te)
		}
		return fmt.Errorf("config: %w", err)
	}
	return arrayLengths(raw, v)
}

// arrayLengths refuses a list in raw, the JSON of the config v,
// longer or shorter than the fixed-size array its key decodes into
// (spacing, origin, direction): encoding/json drops the values past the
// array's end and zeroes those missing, without a word.
func arrayLengths(raw []byte, v any) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil // not an object: Decode has said so
	}
	for _, f := range option.Fields(v) {
		t := f.Type
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		val, ok := obj[f.Key]
		if ok && t.Kind() == reflect.Array && !bytes.Equal(bytes.TrimSpace(val), []byte("null")) && !fixedLength(val, t) {
			return fmt.Errorf("%s=: want %s", f.Key, shapeOf(t))
		}
	}
	return nil
}

// fixedLength says the JSON list v has t's length, and each element, where
// t's elements are arrays, theirs.
func fixedLength(v json.RawMessage, t reflect.Type) bool {
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil || len(items) != t.Len() {
		return false
	}
	if t.Elem().Kind() == reflect.Array {
		for _, it := range items {
			if !fixedLength(it, t.Elem()) {
				return false
			}
		}
	}
	return true
}

// shapeOf names a fixed-size array type as a config's value: "3 numbers",
// "3 lists of 3 numbers".
func shapeOf(t reflect.Type) string {
	if t.Elem().Kind() == reflect.Array {
		return fmt.Sprintf("%d lists of %s", t.Len(), shapeOf(t.Elem()))
	}
	return fmt.Sprintf("%d numbers", t.Len())
}

// typeError says which key of a config holds a value of the wrong type,
// and what it wants: "batch=: want a 64-bit integer, got a string". The
// key is the last element of the error's path that names an option (the
// path ends in a map's key for params).
func typeError(e *json.UnmarshalTypeError) error {
	path := strings.Split(e.Field, ".")
	key := path[len(path)-1]
	keys := optionKeys()
	for i := len(path) - 1; i >= 0; i-- {
		if keys[path[i]] {
			key = path[i]
			break
		}
	}
	got := "a " + e.Value
	if n, ok := strings.CutPrefix(e.Value, "number "); ok {
		if len(n) > 40 {
			n = n[:20] + "…"
		}
		got = n
	} else if e.Value == "array" || e.Value == "object" {
		got = "an " + e.Value
	}
	return fmt.Errorf("%s=: want %s, got %s", key, wanted(e.Type), got)
}

// wanted names a Go type as a config's value of it: "a string".
func wanted(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a %d-bit integer", t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a %d-bit integer ≥ 0", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "a finite number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

var (
	keysOnce sync.Once
	optKeys  map[string]bool
)

// optionKeys is the set of every workload's config keys.
func optionKeys() map[string]bool {
	keysOnce.Do(func() {
		optKeys = map[string]bool{}
		for _, c := range configs {
			for _, f := range option.Fields(c) {
				optKeys[f.Key] = true
			}
		}
	})
	return optKeys
}

// engineFields is the part of every create config that the CLI's engine flags
// hold: where to run, the batch, the memory limit and the dtype. Its keys
// and flags are engine.Settings', but for GPU: the C ABI takes one GPU,
// the command line a list (a test checks them).
type engineFields struct {
	deviceFields
	// Dtype is "float32" (the default) or "float64", where the workload
	// has a choice.
	Dtype string `json:"dtype" flag:"dtype"`
}

// deviceFields is engineFields without the dtype, for the create config
// of a workload whose command has no --dtype (its types are fixed).
type deviceFields struct {
	// Device is "cpu" (the default) or "cuda", GPU its ordinal (default 0).
	Device string `json:"device" flag:"device"`
	GPU    *int   `json:"gpu" flag:"devices"`
	// Batch is the items per replay (0: planned under MemLimit).
	Batch int `json:"batch" flag:"batch"`
	// MemLimit is bytes or a size such as "2GiB" ("" or "0": half of the
	// memory available).
	MemLimit string `json:"mem_limit" flag:"mem-limit"`
}

// configs holds, for each workload, a zero value of its create config
// (the engine's fields, the workload's Config and the arguments that only
// the C ABI has); each workload's file adds its own. Error messages name
// options by these configs' keys, and tl_options lists them.
var configs = map[string]any{}

// extraNames maps the flags of inputs that the C ABI takes as arrays to
// the arguments the Python package names them by.
var extraNames = map[string]string{"f": "f", "x": "x", "volume": "volume", "images": "x", "detector": "detector",
	"theta": "theta", "phi": "phi", "xi": "xi"}

var (
	namesOnce sync.Once
	names     map[string]string
)

// keywords rewrites the flags an error names (--dx) as the keys the
// caller used (dx=).
func keywords(msg string) string {
	namesOnce.Do(func() {
		var all []any
		for _, c := range configs {
			all = append(all, c)
		}
		names = option.Names(extraNames, all...)
	})
	return option.Keywords(msg, names)
}

// create decodes config into a T (a workload's config, the engine's
// fields in it), opens the device it names, compiles the program with
// compile and registers it in *handle. It is the body of every
// tl_<workload>_create.
func create[T interface {
	open() (*engine.Device, error)
}](config *C.char, handle *C.int64_t,
	compile func(c T, dev *engine.Device) (program, error)) *C.char {
	return guard(func() error {
		if handle == nil {
			return fmt.Errorf("config: NULL handle")
		}
		var c T
		if err := decode(config, &c); err != nil {
			return err
		}
		dev, err := c.open()
		if err != nil {
			return err
		}
		p, err := compile(c, dev)
		if err != nil {
			return err
		}
		*handle = C.int64_t(register(p))
		return nil
	})
}

// open opens the device the config names, as the CLI's flags would.
func (e deviceFields) open() (*engine.Device, error) { return engineFields{deviceFields: e}.open() }

// open opens the device the config names, as the CLI's flags would.
func (e engineFields) open() (*engine.Device, error) {
	set := engine.Settings{Device: e.Device, Batch: e.Batch, Dtype: e.Dtype, MemLimit: e.MemLimit}
	if set.MemLimit == "0" { // the C ABI's zero, as its other options': the default
		set.MemLimit = ""
	}
	if e.GPU != nil {
		set.Devices = strconv.Itoa(*e.GPU)
	}
	eng, err := set.Engine()
	if err != nil {
		return nil, err
	}
	return engine.Open(eng)
}

// volumeOf is the caller's (nx, ny, nz) float32 volume at v, C order, for
// the length of the call.
func volumeOf(v *C.float, nx, ny, nz C.int64_t) ([]float32, error) {
	if v == nil || nx < 1 || ny < 1 || nz < 1 {
		return nil, fmt.Errorf("--volume: need an (X, Y, Z) array, got (%d, %d, %d)", nx, ny, nz)
	}
	n := int64(nx) * int64(ny) * int64(nz)
	if n/int64(nx)/int64(ny) != int64(nz) || n > 1<<40 {
		return nil, fmt.Errorf("--volume: shape (%d, %d, %d) is too large", nx, ny, nz)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(v)), n), nil
}

// tl_version writes the ABI version into buf (at most n bytes with the
// terminating NUL).
//
//export tl_version
func tl_version(buf *C.char, n C.int64_t) *C.char {
	return guard(func() error { return putString("version", Version, buf, n) })
}

// tl_release writes the tapeloop release the library was built from
// (internal/version's VERSION, as tapeloop --version prints it) into buf,
// as tl_version.
//
//export tl_release
func tl_release(buf *C.char, n C.int64_t) *C.char {
	return guard(func() error { return putString("release", version.String(), buf, n) })
}

// tl_build writes the build's GPU backend ("none" for a CPU-only build)
// into buf, as tl_version.
//
//export tl_build
func tl_build(buf *C.char, n C.int64_t) *C.char {
	return guard(func() error { return putString("build", engine.GPUBackend, buf, n) })
}

// putString writes s and a terminating NUL into the n bytes at buf; what
// names the call in the error when they do not fit.
func putString(what, s string, buf *C.char, n C.int64_t) error {
	if buf == nil || int64(n) < int64(len(s))+1 {
		return fmt.Errorf("%s: buffer of %d bytes, need %d", what, n, len(s)+1)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(s)+1)
	copy(b, s)
	b[len(s)] = 0
	return nil
}

// tl_free frees an error message or text returned by any tl_ function.
//
//export tl_free
func tl_free(p *C.char) { C.free(unsafe.Pointer(p)) }

// tl_close releases the object behind h, waiting for a call in progress.
//
//export tl_close
func tl_close(h C.int64_t) *C.char {
	return guard(func() error {
		objMu.Lock()
		o, ok := objects[int64(h)]
		delete(objects, int64(h))
		objMu.Unlock()
		if !ok {
			return nil // closing twice is harmless
		}
		o.lock()
		defer o.unlock()
		o.closed = true
		return o.prog.Close()
	})
}

// tl_interrupt stops the call in progress on h, if any, as soon as its
// work reaches a check (between blocks); that call then fails with an
// "interrupted: " message that says interrupt() was called. It does not
// wait for the call; calls waiting for their turn on h then run as usual.
// With no call in progress it does nothing.
//
//export tl_interrupt
func tl_interrupt(h C.int64_t) *C.char {
	return guard(func() error {
		o, err := lookup(h)
		if err != nil {
			return err
		}
		o.stops.Add(1)
		o.prog.Interrupt()
		return nil
	})
}

// tl_dot sets *text to the compiled graph as Graphviz DOT, for the caller
// to free with tl_free.
//
//export tl_dot
func tl_dot(h C.int64_t, text **C.char) *C.char {
	return guard(func() error {
		return call(h, "a workload", 0, func(p program) error {
			s, err := p.DOT()
			if err != nil {
				return err
			}
			*text = C.CString(s)
			return nil
		})
	})
}

// tl_report sets *text to the calls' telemetry as JSON (engine.Report),
// for the caller to free with tl_free: a NaN or ±Inf written as null, its
// place listed in "non_finite".
//
//export tl_report
func tl_report(h C.int64_t, text **C.char) *C.char {
	return guard(func() error {
		return call(h, "a workload", 0, func(p program) error {
			b, places, err := telemetry.MarshalFinite(p.Report())
			if err != nil {
				return err
			}
			if places != nil { // as the command's --report: the places of the nulls
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					return err
				}
				m["non_finite"] = places
				if b, err = json.Marshal(m); err != nil {
					return err
				}
			}
			*text = C.CString(string(b))
			return nil
		})
	})
}

// tl_options sets *text to what the library knows of workload's options,
// as JSON, for the caller to free with tl_free: {"options": [{"key",
// "flag", "default"}], "defaults": {...}, "limits": {...}}. Each option
// is a key of the create config (flag "" for one the command line does
// not have), its default the value the library takes when the key is
// left out (null: none, or one that depends on the data); "defaults"
// holds those of the workload's other arguments (a DRR's orbit) and
// "limits" the largest sizes it accepts. The Python package reads its
// defaults and limits here, and its tests check each option is one of
// its keywords.
//
//export tl_options
func tl_options(workload *C.char, text **C.char) *C.char {
	return guard(func() error {
		b, err := optionsJSON(C.GoString(workload))
		if err != nil {
			return err
		}
		if text == nil {
			return fmt.Errorf("options: NULL text")
		}
		*text = C.CString(string(b))
		return nil
	})
}

// defaultConfigs holds, for a workload with defaults that are not its
// create config's zero value, its create config holding them.
var defaultConfigs = map[string]any{}

// extraDefaults and limits hold, per workload, the defaults of the
// arguments outside its create config and the largest sizes it accepts
// (tl_options).
var (
	extraDefaults = map[string]map[string]any{}
	limits        = map[string]map[string]any{}
)

// optionsJSON is tl_options's text for workload.
func optionsJSON(workload string) ([]byte, error) {
	c, ok := configs[workload]
	if !ok {
		return nil, fmt.Errorf("options: no workload %q", workload)
	}
	defs := map[string]json.RawMessage{}
	if d, ok := defaultConfigs[workload]; ok {
		b, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &defs); err != nil {
			return nil, err
		}
	}
	type opt struct {
		Key     string          `json:"key"`
		Flag    string          `json:"flag"`
		Default json.RawMessage `json:"default"`
	}
	out := struct {
		Options  []opt          `json:"options"`
		Defaults map[string]any `json:"defaults"`
		Limits   map[string]any `json:"limits"`
	}{Options: []opt{}, Defaults: extraDefaults[workload], Limits: limits[workload]}
	for _, f := range option.Fields(engine.Settings{}) { // the engine's, as the CLI shows them
		if v, ok := defs[f.Key]; (!ok || isZeroJSON(v)) && f.Default != "" {
			b, err := json.Marshal(f.Default)
			if err != nil {
				return nil, err
			}
			defs[f.Key] = b
		}
	}
	for _, f := range option.Fields(c) {
		if f.Key == "" || f.Key == "-" {
			continue
		}
		d := json.RawMessage("null")
		if v, ok := defs[f.Key]; ok && !isZeroJSON(v) {
			d = v
		} else if f.Default != "" && f.Type.Kind() == reflect.String { // the Config's default tag
			b, err := json.Marshal(f.Default)
			if err != nil {
				return nil, err
			}
			d = b
		}
		out.Options = append(out.Options, opt{f.Key, strings.Trim(f.Flag, "-"), d})
	}
	if out.Defaults == nil {
		out.Defaults = map[string]any{}
	}
	if out.Limits == nil {
		out.Limits = map[string]any{}
	}
	return json.Marshal(out)
}

// isZeroJSON reports whether v is a zero value's JSON, which a create
// config reads as not given.
func isZeroJSON(v json.RawMessage) bool {
	switch string(v) {
	case "null", `""`, "0", "false", "[]", "{}":
		return true
	}
	return false
}

// tl_selftest checks the error boundary, for the package's tests: kind 1
// panics inside it as a bug in the engine would, and must come back as an
// "internal error" message with the process alive.
//
//export tl_selftest
func tl_selftest(kind C.int) *C.char {
	return guard(func() error {
		if kind == 1 {
			var m map[string]int
			m["boundary"]++ // a nil map: a runtime panic
		}
		return nil
	})
}
