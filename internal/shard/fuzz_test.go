package shard

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// shardFile is a shard archive: meta.json, then members name, data, ….
func shardFile(meta []byte, kv ...[]byte) []byte {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	w, _ := z.CreateHeader(&zip.FileHeader{Name: "meta.json", Method: zip.Store})
	w.Write(meta)
	for i := 0; i+1 < len(kv); i += 2 {
		w, _ := z.CreateHeader(&zip.FileHeader{Name: string(kv[i]), Method: zip.Store})
		w.Write(kv[i+1])
	}
	z.Close()
	return buf.Bytes()
}

// member is a .npy member: a header for descr and shape, then data.
func member(descr, shape string, data []byte) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }\n", descr, shape)
	b := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(b[8:], uint16(len(dict)))
	return append(append(b, dict...), data...)
}

// FuzzShardMeta merges one shard whose meta.json and member are the
// fuzzer's: whatever the metadata claims (rows, N, top-k, dtype) and the
// member's header says, the merge must not panic, must fail in one line
// or write the matrix its metadata describes, and must allocate in
// proportion to the shard, not to N.
func FuzzShardMeta(f *testing.F) {
	meta := `{"format":"tapeloop-affinity-shard/1","n":2,"d":3,"metric":"dot","dtype":"float32","fingerprint":"f","lo":0,"hi":2,"index":0,"count":1}`
	f.Add([]byte(meta), []byte("affinity.npy"), member("<f4", "(2, 2)", make([]byte, 16)))
	f.Add([]byte(strings.Replace(meta, `"count":1`, `"count":1,"topk":1`, 1)), []byte("indices.npy"), member("<i8", "(2, 1)", make([]byte, 16)))
	f.Add([]byte(strings.Replace(meta, `"n":2`, `"n":4611686018427387904`, 1)), []byte("affinity.npy"), member("<f4", "(2, 4611686018427387904)", nil))
	f.Add([]byte(strings.Replace(meta, `"n":2`, `"n":100000`, 1)), []byte("affinity.npy"), member("<f4", "(2, 100000)", make([]byte, 64)))
	f.Add([]byte(`{"format":"tapeloop-affinity-shard/1"}`), []byte("affinity.npy"), []byte("junk"))
	dir := f.TempDir() // reused from one input to the next
	f.Fuzz(func(t *testing.T, meta, name, data []byte) {
		in, out := filepath.Join(dir, "s.npz"), filepath.Join(dir, "m.npz")
		os.Remove(out)
		file := shardFile(meta, name, data)
		if err := os.WriteFile(in, file, 0o644); err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err := Merge(out, []string{in})
		runtime.ReadMemStats(&m1)
		if a, limit := m1.TotalAlloc-m0.TotalAlloc, 32*uint64(len(file))+4<<20; a > limit {
			t.Fatalf("allocated %d bytes for a %d-byte shard (limit %d)", a, len(file), limit)
		}
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			if _, serr := os.Stat(out); serr == nil {
				t.Fatalf("output left after %v", err)
			}
			return
		}
		z, err := npy.OpenNPZ(in)
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		m, err := ReadMeta(z, in)
		if err != nil || m.Lo != 0 || m.Hi != m.N {
			t.Fatalf("merged a shard of rows [%d, %d) of %d: %v", m.Lo, m.Hi, m.N, err)
		}
	})
}
