package npy

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestNPZChecksDamagedMembers: a byte changed inside a member's data (a
// shard damaged on disk or in transfer) fails the read that takes the
// member's last byte with zip's checksum error, for a .npy member read as
// an array and a raw member read as bytes; the archive's other members
// and an undamaged archive read as written.
func TestNPZChecksDamagedMembers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 7, 3
	want := make([]float64, rows*cols)
	for i := range want {
		want[i] = rng.NormFloat64()
	}
	raw := []byte(`{"shard": "2/3", "rows": [14, 21]}`)
	var buf bytes.Buffer
	z := NewNPZWriter(&buf)
	w, err := z.Create("a", Float64, []int{rows, cols})
	if err == nil {
		err = w.Write64(want)
	}
	var rw io.Writer
	if err == nil {
		rw, err = z.CreateRaw("meta.json")
	}
	if err == nil {
		_, err = rw.Write(raw)
	}
	if err == nil {
		err = z.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	readA := func(b []byte) ([]float64, error) {
		zr, err := readNPZ(bytes.NewReader(b), int64(len(b)), "x.npz")
		if err != nil {
			return nil, err
		}
		r, c, err := zr.Open("a")
		if err != nil {
			return nil, err
		}
		defer c.Close()
		got := make([]float64, rows*cols)
		if _, err := r.Read64(got); err != nil {
			return got, err
		}
		return got, nil
	}
	readMeta := func(b []byte) ([]byte, error) {
		zr, err := readNPZ(bytes.NewReader(b), int64(len(b)), "x.npz")
		if err != nil {
			return nil, err
		}
		rc, _, err := zr.OpenRaw("meta.json")
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	if got, err := readA(good); err != nil || !slices.Equal(got, want) {
		t.Fatalf("undamaged array: %v", err)
	}
	if got, err := readMeta(good); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("undamaged raw member: %q, %v", got, err)
	}

	at := bytes.Index(good, []byte("\x93NUMPY"))
	end := bytes.Index(good, raw)
	if at < 0 || end < 0 {
		t.Fatal("members not found in the archive")
	}
	for _, c := range []struct {
		name string
		pos  int
	}{{"array's last value", at + 128 + 8*rows*cols - 3}, {"array's first value", at + 128 + 2}, {"raw member", end + 5}} {
		bad := slices.Clone(good)
		bad[c.pos] ^= 0x10
		_, errA := readA(bad)
		_, errM := readMeta(bad)
		damagedA := c.pos < end
		if damagedA && !errors.Is(errA, zip.ErrChecksum) || !damagedA && errA != nil {
			t.Errorf("%s damaged: reading the array: %v", c.name, errA)
		}
		if !damagedA && !errors.Is(errM, zip.ErrChecksum) || damagedA && errM != nil {
			t.Errorf("%s damaged: reading the raw member: %v", c.name, errM)
		}
	}
}

// readNPZ reads the archive of size bytes in r; name stands for it in
// errors.
func readNPZ(r io.ReaderAt, size int64, name string) (*NPZ, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: not an .npz archive (%v)", name, ErrFormat, err)
	}
	return &NPZ{zr: zr, path: name}, nil
}
