package ops

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestInterpModesMatchKernel: the modes interpMode passes to the
// interp1d_f32 kernel are the values of enum interp_mode in the kernel's
// source, name for name, and the enum has no other.
func TestInterpModesMatchKernel(t *testing.T) {
	src, err := os.ReadFile("../cuda/kernels/interp.cu")
	if err != nil {
		t.Fatal(err)
	}
	enum := regexp.MustCompile(`enum interp_mode \{([^}]*)\};`).FindSubmatch(src)
	if enum == nil {
		t.Fatal("interp.cu: no enum interp_mode { … };")
	}
	got := map[string]int64{}
	for _, m := range regexp.MustCompile(`(\w+)\s*=\s*(\d+)`).FindAllSubmatch(enum[1], -1) {
		v, err := strconv.ParseInt(string(m[2]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		got[string(m[1])] = v
	}
	want := map[string]int64{"INTERP_GRAM": interpGram, "INTERP_COLSUM": interpColsum, "INTERP_SUMSQ": interpSumSq,
		"INTERP_SUM": interpSum, "INTERP_VALUES": interpValues}
	for name, v := range want {
		if c, ok := got[name]; !ok || c != v {
			t.Errorf("%s: Go %d, interp.cu %v (present %v)", name, v, c, ok)
		}
	}
	if len(got) != len(want) {
		t.Errorf("interp.cu's enum interp_mode has %d values %v, Go names %d", len(got), got, len(want))
	}
}
