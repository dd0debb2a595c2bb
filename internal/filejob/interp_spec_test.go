package filejob_test

import (
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/filejob"
)

func TestInterpSpecValidate(t *testing.T) {
	ok := filejob.DefaultInterpSpec()
	cases := []struct {
		edit func(*filejob.InterpSpec)
		want string
	}{
		{func(*filejob.InterpSpec) {}, ""},
		{func(s *filejob.InterpSpec) { s.Reduce, s.Method = "", "" }, ""}, // defaults
		{func(s *filejob.InterpSpec) { s.Reduce = "mean" }, "--reduce"},
		{func(s *filejob.InterpSpec) { s.Method = "fast" }, "--method"},
		{func(s *filejob.InterpSpec) { s.Interpolants = 0 }, "--interpolants 0"},
		{func(s *filejob.InterpSpec) { s.Grid = 3 }, "--grid 3"},
		{func(s *filejob.InterpSpec) { s.Interpolants, s.Grid = 1<<20, 1<<12 }, "table too large"},
		{func(s *filejob.InterpSpec) { s.Points = 0 }, "--points 0"},
		{func(s *filejob.InterpSpec) { s.Points, s.X = 0, "x.npy" }, ""}, // N comes from the file
		{func(s *filejob.InterpSpec) { s.Grid, s.F = 0, "f.npy" }, ""},   // G comes from the file
	}
	for i, c := range cases {
		s := ok
		c.edit(&s)
		err := s.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("case %d: %v, want %q", i, err, c.want)
		}
	}
}
