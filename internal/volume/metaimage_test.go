package volume

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OpenMetaImage reads a 2-D MetaImage's elements as stored (a MET_DOUBLE
// not rounded, a NaN kept); Load and Shape refuse it as a volume, and a
// header giving NDims = 2 after DimSize is refused.
func TestOpenMetaImage(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	const cols, rows = 7, 5
	want := make([]float64, cols*rows)
	var raw []byte
	for i := range want {
		want[i] = rng.NormFloat64()
		if i == 3 {
			want[i] = math.NaN()
		}
		raw = binary.BigEndian.AppendUint64(raw, math.Float64bits(want[i]))
	}
	hdr := fmt.Sprintf("ObjectType = Image\nNDims = 2\nTransformMatrix = 1 0 0 1\nOffset = 0 0\nElementSpacing = 0.25 0.5\n"+
		"DimSize = %d %d\nElementType = MET_DOUBLE\nBinaryDataByteOrderMSB = True\nElementDataFile = LOCAL\n", cols, rows)
	os.WriteFile(p("image.mha"), append([]byte(hdr), raw...), 0o644)
	m, err := OpenMetaImage(p("image.mha"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if fmt.Sprintf("%v %v %s", m.Dims, m.Spacing, m.Type) != "[7 5] [0.25 0.5] float64" {
		t.Errorf("dims %v, spacing %v, type %s; want [7 5] [0.25 0.5] float64", m.Dims, m.Spacing, m.Type)
	}
	got := make([]float64, len(want))
	if err := m.Read64(got[:4]); err != nil {
		t.Fatal(err)
	}
	if err := m.Read64(got[4:]); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("element %d is %v, want %v", i, got[i], want[i])
		}
	}
	if err := m.Read64(got[:1]); err == nil {
		t.Error("an element past the last was read")
	}
	if _, err := Load(p("image.mha"), Options{}); err == nil || !strings.Contains(err.Error(), "NDims = 2: one image, want a 3-D volume") {
		t.Errorf("Load of a 2-D image: %v", err)
	}
	if _, ok := Shape(p("image.mha"), Options{}); ok {
		t.Error("Shape gave a 2-D image a volume's shape")
	}
	os.WriteFile(p("late.mha"), []byte("DimSize = 2 3 4\nNDims = 2\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n"), 0o644)
	if _, err := OpenMetaImage(p("late.mha"), nil); err == nil || !strings.Contains(err.Error(), "NDims = 2 comes after DimSize") {
		t.Errorf("NDims after DimSize: %v", err)
	}
}
