package volume

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// The volume readers on whole files, as tapeloop opens them: whatever a
// header claims, a reader must not panic, must say what is wrong in one
// line, and must allocate in proportion to the bytes the file really holds
// (after decompression): a constant for its buffers, 16 bytes per input
// byte, and the volume it returns.

const fuzzBuffers = 8 << 20 // the readers' bufio buffers and decompressors' state

// fuzzFile writes b to name in dir (the fuzz target's, reused from one
// input to the next: a new directory per input would cost more than the
// reading).
func fuzzFile(t *testing.T, dir, name string, b []byte) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// fuzzAllocs runs load and checks what it allocated against n input bytes.
func fuzzAllocs(t *testing.T, n int, load func() (*Volume, error)) {
	t.Helper()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	v, err := load()
	runtime.ReadMemStats(&m1)
	limit := 16*uint64(n) + fuzzBuffers
	if v != nil {
		limit += 8 * uint64(len(v.V))
	}
	if a := m1.TotalAlloc - m0.TotalAlloc; a > limit {
		t.Fatalf("allocated %d bytes for a %d-byte file (limit %d)", a, n, limit)
	}
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error of several lines: %q", err)
		}
		return
	}
	if int64(len(v.V)) != v.N[0]*v.N[1]*v.N[2] {
		t.Fatalf("%d voxels for shape %v", len(v.V), v.N)
	}
}

// fuzzNIfTI is a little-endian NIfTI-1 file: an int16 volume of the given
// shape, its data zeros, cut to keep bytes of data (−1: all).
func fuzzNIfTI(nx, ny, nz int16, keep int) []byte {
	h := make([]byte, 352)
	o := binary.LittleEndian
	o.PutUint32(h[0:], 348)
	for i, d := range []int16{3, nx, ny, nz, 1, 1, 1, 1} {
		o.PutUint16(h[40+2*i:], uint16(d))
	}
	o.PutUint16(h[70:], 4)
	o.PutUint16(h[72:], 16)
	for i := range 4 {
		o.PutUint32(h[76+4*i:], math.Float32bits(1))
	}
	o.PutUint32(h[108:], math.Float32bits(352))
	o.PutUint32(h[112:], math.Float32bits(1))
	copy(h[344:], "n+1\x00")
	n := 2 * int(nx) * int(ny) * int(nz)
	if keep >= 0 {
		n = min(n, keep)
	}
	return append(h, make([]byte, n)...)
}

// FuzzNIfTIFile reads a .nii, or with gz the same bytes compressed as a
// .nii.gz, through loadNIfTI: the gzip path counts the stream before it
// allocates, so a small file claiming a large volume costs nothing.
func FuzzNIfTIFile(f *testing.F) {
	f.Add(fuzzNIfTI(2, 3, 4, -1), false)
	f.Add(fuzzNIfTI(2, 3, 4, -1), true)
	f.Add(fuzzNIfTI(1000, 1000, 1000, 64), true)
	f.Add(fuzzNIfTI(3, 3, 3, 10), false)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte, gz bool) {
		name, data := "v.nii", b
		if gz {
			var buf bytes.Buffer
			w := gzipWriters.Get().(*gzip.Writer)
			w.Reset(&buf)
			w.Write(b)
			w.Close()
			gzipWriters.Put(w)
			name, data = "v.nii.gz", buf.Bytes()
		}
		path := fuzzFile(t, dir, name, data)
		Shape(path, Options{})
		fuzzAllocs(t, len(b), func() (*Volume, error) { return loadNIfTI(path, nil, true) })
	})
}

// FuzzMetaImage reads a .mha (header, then LOCAL data, compressed or not)
// through loadMeta.
func FuzzMetaImage(f *testing.F) {
	hdr := "ObjectType = Image\nNDims = 3\nDimSize = 2 3 4\nElementSpacing = 0.5 0.75 2\nElementType = MET_SHORT\n"
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(make([]byte, 48))
	w.Close()
	f.Add([]byte(hdr + "ElementDataFile = LOCAL\n" + string(make([]byte, 48))))
	f.Add([]byte(hdr + "CompressedData = True\nElementDataFile = LOCAL\n" + z.String()))
	f.Add([]byte(strings.Replace(hdr, "2 3 4", "1000 1000 1000", 1) + "CompressedData = True\nElementDataFile = LOCAL\n" + z.String()))
	f.Add([]byte(hdr + "ElementDataFile = other.raw\n"))
	f.Add([]byte(hdr + "\x00\x01binary\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := fuzzFile(t, dir, "v.mha", b)
		Shape(path, Options{})
		fuzzAllocs(t, len(b), func() (*Volume, error) { return loadMeta(path, nil, true) })
	})
}
