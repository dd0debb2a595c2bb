package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/engine"
)

func TestEngineValidate(t *testing.T) {
	cases := []struct {
		e    engine.Engine
		want string // "" valid; else a part of the error
	}{
		{engine.Engine{}, ""},
		{engine.Engine{Device: "cpu", Dtype: "float64", MemLimit: 1 << 20, Batch: 3}, ""},
		{engine.Engine{Device: "tpu"}, `--device "tpu": want cpu or cuda`},
		{engine.Engine{GPUs: []int{0}}, "--devices: needs --device cuda"},
		{engine.Engine{Dtype: "float16"}, `--dtype "float16"`},
		{engine.Engine{MemLimit: -1}, "--mem-limit"},
		{engine.Engine{Batch: -2}, "--batch -2"},
	}
	if engine.GPUBuild {
		cases = append(cases,
			struct {
				e    engine.Engine
				want string
			}{engine.Engine{Device: "cuda", GPUs: []int{1, 1}}, "GPU 1 listed twice"})
	} else {
		cases = append(cases,
			struct {
				e    engine.Engine
				want string
			}{engine.Engine{Device: "cuda"}, "built without CUDA"})
	}
	for _, c := range cases {
		err := c.e.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", c.e, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, engine.ErrEngine)):
			t.Errorf("%+v: %v, want an ErrEngine saying %q", c.e, err, c.want)
		}
	}
}

func TestOpenResolvesTheMemoryLimitOnce(t *testing.T) {
	d, err := engine.Open(engine.Engine{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := engine.DefaultMemLimit()
	if err != nil {
		t.Fatal(err)
	}
	// Available memory moves while tests run: within a quarter is the same rule.
	if d.MemLimit <= 0 || d.MemLimit > want*5/4 || d.MemLimit < want*3/4 {
		t.Errorf("default limit %d, DefaultMemLimit %d", d.MemLimit, want)
	}
	if d.RunConfig().MemLimit != d.MemLimit || d.Kind() != "cpu" || d.GPU() {
		t.Errorf("device %+v", d)
	}
	d, err = engine.Open(engine.Engine{MemLimit: 12345, Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if d.MemLimit != 12345 || d.RunConfig().Batch != 7 || d.WithBatch(3).RunConfig().Batch != 3 || d.RunConfig().Batch != 7 {
		t.Errorf("device %+v", d.RunConfig())
	}
}
