package npy

import (
	"archive/zip"
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// checkAllocs measures what the code between its call and the call of
// the function it returns allocates, and fails t when that is more than
// 16 bytes per input byte plus 1 MiB (bufio and flate state) per archive
// member opened: memory proportional to the input, whatever it claims.
// Use as defer checkAllocs(t, len(b), members)().
func checkAllocs(t *testing.T, n, members int) func() {
	done := allocs(t, n)
	return func() { done(members) }
}

// allocs is checkAllocs with the count of members given at the end.
func allocs(t *testing.T, n int) func(members int) {
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	return func(members int) {
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		if a, limit := m1.TotalAlloc-m0.TotalAlloc, 16*uint64(n)+uint64(1+members)<<20; a > limit {
			t.Fatalf("allocated %d bytes for %d input bytes and %d members (limit %d)", a, n, members, limit)
		}
	}
}

// npzOf is a zip of the members name, data, name, data, …, deflated when
// deflate is set.
func npzOf(deflate bool, kv ...string) []byte {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	method := zip.Store
	if deflate {
		method = zip.Deflate
	}
	for i := 0; i+1 < len(kv); i += 2 {
		w, _ := z.CreateHeader(&zip.FileHeader{Name: kv[i], Method: method})
		w.Write([]byte(kv[i+1]))
	}
	z.Close()
	return buf.Bytes()
}

// npzSeeds are FuzzNPZ's seeds (also in testdata/fuzz/FuzzNPZ): a shard,
// a deflated top-k archive with a Fortran-ordered member, and a member
// whose header claims 8 GB.
func npzSeeds() [][]byte {
	a := string(rawFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", make([]byte, 24)))
	i := string(rawFile("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 2), }", make([]byte, 32)))
	return [][]byte{
		npzOf(false, "meta.json", `{"n": 2}`, "affinity.npy", a),
		npzOf(true, "indices.npy", i, "values.npy", a),
		npzOf(false, "x.npy", string(rawFile("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000,), }", nil))),
	}
}

// FuzzNPZ opens an archive from its bytes and reads every member, as
// arrays and raw: no panic, errors of one line, and allocation
// proportional to the archive, whatever its directory and the members'
// headers claim.
func FuzzNPZ(f *testing.F) {
	for _, b := range npzSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		done := allocs(t, len(b))
		z, err := readNPZ(bytes.NewReader(b), int64(len(b)), "fuzz.npz")
		if err != nil {
			done(0)
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		names := z.Names()
		if len(names) > 64 {
			names = names[:64] // each costs its decompressor's state
		}
		defer func() { done(2 * len(names)) }()
		for _, name := range names {
			if _, err := z.ReadRaw(name, 1<<16); err != nil && strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			r, c, err := z.Open(name)
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error of several lines: %q", err)
				}
				continue
			}
			buf := make([]float64, 256)
			for r.Remaining() > 0 {
				if _, err := r.Read64(buf); err != nil {
					break
				}
			}
			c.Close()
		}
	})
}
