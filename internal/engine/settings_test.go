package engine

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Settings.Engine parses each setting as the front ends write it; what it
// cannot parse is an ErrEngine naming the flag.
func TestSettingsEngine(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Settings
		want Engine
	}{
		{"defaults", Settings{}, Engine{}},
		{"every setting", Settings{MemLimit: "3MiB", Batch: 7, Device: "cuda", Devices: "2, 0,5", Dtype: "float64"},
			Engine{MemLimit: 3 << 20, Batch: 7, Device: "cuda", GPUs: []int{2, 0, 5}, Dtype: "float64"}},
		{"bytes", Settings{MemLimit: "1234567"}, Engine{MemLimit: 1234567}},
	} {
		got, err := c.s.Engine()
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct {
		s    Settings
		flag string
	}{
		{Settings{MemLimit: "lots"}, "--mem-limit"},
		{Settings{MemLimit: "-1"}, "--mem-limit"},
		{Settings{Devices: "0,x"}, "--devices"},
		{Settings{Devices: "-1"}, "--devices"},
	} {
		_, err := c.s.Engine()
		if err == nil || !errors.Is(err, ErrEngine) || !strings.HasPrefix(err.Error(), c.flag+": ") {
			t.Errorf("%+v: error %v, want an ErrEngine starting %q", c.s, err, c.flag)
		}
	}
}
