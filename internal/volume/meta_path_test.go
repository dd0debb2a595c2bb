package volume

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestMetaImageDataFilePaths: ElementDataFile is read as ITK reads it: a
// relative path from the header's directory, also one that leads out of
// it (../raw/v.raw), and an absolute path as it is; all three give the
// voxels written.
func TestMetaImageDataFilePaths(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"hdr", "raw"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const nx, ny, nz = 3, 4, 5
	rng := rand.New(rand.NewPCG(41, 42))
	want := make([]float32, nx*ny*nz)
	raw := make([]byte, 4*len(want))
	for i := range want {
		want[i] = float32(rng.NormFloat64())
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(want[i]))
	}
	rawPath := filepath.Join(root, "raw", "v.raw")
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hdr", "v.raw"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{"v.raw", "../raw/v.raw", rawPath} {
		hdr := filepath.Join(root, "hdr", "v.mhd")
		text := "ObjectType = Image\nNDims = 3\nDimSize = 3 4 5\nElementSpacing = 1 1 1\nElementType = MET_FLOAT\nElementDataFile = " + data + "\n"
		if err := os.WriteFile(hdr, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := Load(hdr, Options{VoxelsOnly: true})
		if err != nil {
			t.Fatalf("ElementDataFile %s: %v", data, err)
		}
		if len(v.V) != len(want) {
			t.Fatalf("ElementDataFile %s: %d voxels, want %d", data, len(v.V), len(want))
		}
		if v.N != [3]int64{nx, ny, nz} {
			t.Fatalf("ElementDataFile %s: shape %v", data, v.N)
		}
		for x := range nx { // the file holds x fastest; V is C order over (x, y, z)
			for y := range ny {
				for z := range nz {
					if got, w := v.V[(x*ny+y)*nz+z], want[x+nx*(y+ny*z)]; got != w {
						t.Fatalf("ElementDataFile %s: voxel (%d, %d, %d) %v, want %v", data, x, y, z, got, w)
					}
				}
			}
		}
	}
}
