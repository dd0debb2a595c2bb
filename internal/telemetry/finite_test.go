package telemetry

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"testing"
)

type inner struct {
	Max  float64 `json:"max"`
	Name string  `json:"name"`
}

type Embedded struct {
	Mean float32 `json:"mean"`
}

type outer struct {
	Embedded
	Sum      float64            `json:"sum"`
	Rows     []inner            `json:"rows"`
	ByName   map[string]float64 `json:"by_name"`
	Ptr      *inner             `json:"ptr"`
	Any      any                `json:"any"`
	Opt      float64            `json:"opt,omitempty"`
	Empty    float64            `json:"empty,omitempty"`
	Skipped  float64            `json:"-"`
	hidden   float64
	Untagged int
	Bytes    []byte   `json:"bytes"`
	Nil      []inner  `json:"nil"`
	Arr      [2]int32 `json:"arr"`
}

func sample(bad bool) outer {
	nan, inf := math.NaN(), math.Inf(1)
	if !bad {
		nan, inf = 1.5, -2.25
	}
	return outer{
		Embedded: Embedded{Mean: float32(nan)},
		Sum:      inf,
		Rows:     []inner{{Max: 3, Name: "a"}, {Max: -inf, Name: "b"}},
		ByName:   map[string]float64{"z": 1, "a": nan},
		Ptr:      &inner{Max: nan, Name: "p"},
		Any:      []any{1.0, nan, "s"},
		Opt:      nan,
		Skipped:  nan,
		hidden:   nan,
		Untagged: 7,
		Bytes:    []byte{1, 2, 3},
		Arr:      [2]int32{4, 5},
	}
}

// TestMarshalFiniteAsJSON: without non-finite values the bytes are
// encoding/json's own; with them, each is null, its place listed, and
// everything else as encoding/json writes the finite version.
func TestMarshalFiniteAsJSON(t *testing.T) {
	good := sample(false)
	want, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	got, places, err := MarshalFinite(good)
	if err != nil || !bytes.Equal(got, want) || places != nil {
		t.Fatalf("finite value:\n got %s, %v, %v\nwant %s", got, places, err, want)
	}

	if _, err := json.Marshal(sample(true)); err == nil {
		t.Fatal("encoding/json took NaN: the test is not testing anything")
	}
	got, places, err = MarshalFinite(sample(true))
	if err != nil {
		t.Fatal(err)
	}
	wantPlaces := []string{"mean", "sum", "rows[1].max", "by_name.a", "ptr.max", "any[1]", "opt"}
	if !slices.Equal(places, wantPlaces) {
		t.Errorf("places %q, want %q", places, wantPlaces)
	}
	var gotTree, wantTree map[string]any
	if err := json.Unmarshal(got, &gotTree); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &wantTree); err != nil {
		t.Fatal(err)
	}
	// The expectation: the finite sample's tree with those places null.
	wantTree["mean"], wantTree["sum"], wantTree["opt"] = nil, nil, nil
	wantTree["rows"].([]any)[1].(map[string]any)["max"] = nil
	wantTree["by_name"].(map[string]any)["a"] = nil
	wantTree["ptr"].(map[string]any)["max"] = nil
	wantTree["any"].([]any)[1] = nil
	if !reflect.DeepEqual(gotTree, wantTree) {
		t.Errorf("got  %v\nwant %v", gotTree, wantTree)
	}
	// Field order is the struct's, as encoding/json writes it.
	keys := func(b []byte) []string {
		var ks []string
		d := json.NewDecoder(bytes.NewReader(b))
		d.Token()
		for d.More() {
			k, _ := d.Token()
			ks = append(ks, k.(string))
			var skip json.RawMessage
			d.Decode(&skip)
		}
		return ks
	}
	if g, w := keys(got), keys(want); !slices.Equal(g, w) {
		t.Errorf("keys %q, want %q", g, w)
	}
}

// TestReportWithNaNResult: a report whose result holds NaN and -Inf is
// written, as JSON, with those values null and listed in non_finite; a
// finite report is written as before, with no non_finite member.
func TestReportWithNaNResult(t *testing.T) {
	type result struct {
		Sum   float64   `json:"sum"`
		Stats []float64 `json:"stats"`
	}
	r := &Report{Workload: "affinity", Result: result{Sum: math.NaN(), Stats: []float64{1, math.Inf(-1)}}}
	var buf bytes.Buffer
	if err := r.Encode(&buf); err != nil {
		t.Fatalf("encode: %v", err)
	}
	var back struct {
		Result struct {
			Sum   *float64   `json:"sum"`
			Stats []*float64 `json:"stats"`
		} `json:"result"`
		NonFinite []string `json:"non_finite"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, buf.Bytes())
	}
	if back.Result.Sum != nil || len(back.Result.Stats) != 2 || *back.Result.Stats[0] != 1 || back.Result.Stats[1] != nil {
		t.Errorf("result %+v", back.Result)
	}
	if want := []string{"result.sum", "result.stats[1]"}; !slices.Equal(back.NonFinite, want) {
		t.Errorf("non_finite %q, want %q", back.NonFinite, want)
	}

	r.Result = result{Sum: 2, Stats: []float64{1}}
	buf.Reset()
	if err := r.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	want, _ := json.MarshalIndent(r, "", "  ")
	if !bytes.Equal(buf.Bytes(), append(want, '\n')) {
		t.Errorf("finite report:\n%s\nwant\n%s", buf.Bytes(), want)
	}
}
