package main

import (
	"encoding/json"
	"testing"

	"github.com/tapeloop/tapeloop/graphs/option"
	"github.com/tapeloop/tapeloop/graphs/wavelet"
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
	if _, err := optionsJSON("nope"); err == nil {
		t.Error("an unknown workload has options")
	}
}
