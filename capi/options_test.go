package main

import (
	"encoding/json"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/graphs/wavelet"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/ops"
)

// TestOptionsJSON: tl_options lists every key of each workload's create
// config, with the defaults and limits the library itself uses.
func TestOptionsJSON(t *testing.T) {
	type opts struct {
		Options []struct {
			Key, Flag string
			Default   any
		}
		Defaults map[string]any
		Limits   map[string]float64
	}
	read := func(w string) (o opts, def map[string]any) {
		b, err := optionsJSON(w)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v in %s", w, err, b)
		}
		def = map[string]any{}
		for _, x := range o.Options {
			def[x.Key] = x.Default
		}
		return o, def
	}
	for w, c := range configs {
		o, _ := read(w)
		keys := 0
		for _, f := range option.Fields(c) {
			if f.Key != "" && f.Key != "-" {
				keys++
			}
		}
		if len(o.Options) != keys || o.Defaults == nil || o.Limits == nil {
			t.Errorf("%s: %d options of %d, defaults %v, limits %v", w, len(o.Options), keys, o.Defaults, o.Limits)
		}
	}
	o, def := read("drr")
	s := filejob.DefaultDRRSpec()
	if def["method"] != "siddon" || def["frame"] != "lps" || def["step"] != nil || o.Defaults["sdd"] != s.SDD || o.Defaults["sid"] != s.SID ||
		o.Defaults["pixel"] != s.Pixel || o.Limits["poses"] != ops.MaxPoses {
		t.Errorf("drr: options %v, defaults %v, limits %v", def, o.Defaults, o.Limits)
	}
	if d, _ := json.Marshal(o.Defaults["detector"]); string(d) != "[200,200]" || s.Detector != "200x200" {
		t.Errorf("drr: detector %s, the CLI's %s", d, s.Detector)
	}
	o, def = read("wavelet")
	if def["a"] != 1.0 || def["boundary"] != "reflect" || o.Limits["combinations"] != wavelet.MaxCombos {
		t.Errorf("wavelet: options %v, limits %v", def, o.Limits)
	}
	if _, def = read("interp"); def["reduce"] != "sumsq" || def["method"] != "auto" {
		t.Errorf("interp: options %v", def)
	}
	if _, def = read("affinity"); def["metric"] != "dot" || def["method"] != "auto" || def["topk"] != nil {
		t.Errorf("affinity: options %v", def)
	}
	if _, err := optionsJSON("nope"); err == nil {
		t.Error("an unknown workload has options")
	}
}

// TestEngineFieldsAreSettings: the engine's fields of a create config
// have engine.Settings' keys, flags and types, but for the one GPU the C
// ABI takes where the command line takes a list.
func TestEngineFieldsAreSettings(t *testing.T) {
	for _, f := range option.Fields(engineFields{}) {
		if f.Key == "gpu" {
			if f.Flag != "devices" {
				t.Errorf("gpu: flag %q, want devices", f.Flag)
			}
			continue
		}
		s := option.Flag(engine.Settings{}, f.Flag)
		if s.Key != f.Key || s.Type != f.Type {
			t.Errorf("%s: key %q of type %v, engine.Settings has %q of %v", f.Go, f.Key, f.Type, s.Key, s.Type)
		}
	}
	if n, m := len(option.Fields(engineFields{})), len(option.Fields(engine.Settings{})); n != m {
		t.Errorf("%d engine fields, engine.Settings has %d", n, m)
	}
	_, def := func() (any, map[string]any) {
		b, _ := optionsJSON("drr")
		var o struct {
			Options []struct {
				Key     string
				Default any
			}
		}
		json.Unmarshal(b, &o)
		m := map[string]any{}
		for _, x := range o.Options {
			m[x.Key] = x.Default
		}
		return nil, m
	}()
	if def["device"] != "cpu" || def["dtype"] != "float32" || def["batch"] != nil || def["method"] != "siddon" {
		t.Errorf("drr's engine defaults: %v", def)
	}
}
