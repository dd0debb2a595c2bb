package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/testutil"
)

// rawFile assembles a .npy file by hand: header dictionary and raw data.
func rawFile(dict string, data []byte) []byte {
	hdr := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	pad := (64 - (10+len(dict)+1)%64) % 64
	dict += strings.Repeat(" ", pad) + "\n"
	binary.LittleEndian.PutUint16(hdr[8:], uint16(len(dict)))
	return append(append(hdr, dict...), data...)
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []Dtype{Float32, Float64} {
		for _, shape := range [][]int{{0}, {1}, {7}, {3, 5}, {2, 3, 4}, {}} {
			n := 1
			for _, d := range shape {
				n *= d
			}
			src := make([]float64, n)
			for i := range src {
				src[i] = rng.NormFloat64()
			}
			var buf bytes.Buffer
			w, err := NewWriter(&buf, dt, shape)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write64(src); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			hdrLen := len(EncodeHeader(dt, shape))
			if hdrLen%64 != 0 || buf.Bytes()[hdrLen-1] != '\n' {
				t.Errorf("%v %v: header of %d bytes, not 64-aligned or no final newline", dt, shape, hdrLen)
			}
			r, err := NewReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if r.Dtype != dt || ShapeString(r.Shape) != ShapeString(shape) {
				t.Errorf("read back %v %v, wrote %v %v", r.Dtype, r.Shape, dt, shape)
			}
			got := make([]float64, n)
			if k, err := r.Read64(got); k != n || (err != nil && n > 0) {
				t.Fatalf("Read64 = %d, %v", k, err)
			}
			for i := range src {
				want := src[i]
				if dt == Float32 {
					want = float64(float32(want))
				}
				if got[i] != want {
					t.Fatalf("%v %v: element %d = %v, want %v", dt, shape, i, got[i], want)
				}
			}
		}
	}
}

func TestReadsEveryDtypeAndByteOrder(t *testing.T) {
	vals := []float64{0, 1, 2, 100, 127}
	for _, c := range []struct {
		descr string
		enc   func(o binary.AppendByteOrder, v float64) []byte
	}{
		{"b1", func(o binary.AppendByteOrder, v float64) []byte { return []byte{b2u(v != 0)} }},
		{"u1", func(o binary.AppendByteOrder, v float64) []byte { return []byte{byte(v)} }},
		{"i1", func(o binary.AppendByteOrder, v float64) []byte { return []byte{byte(int8(v))} }},
		{"u2", func(o binary.AppendByteOrder, v float64) []byte { return o.AppendUint16(nil, uint16(v)) }},
		{"i2", func(o binary.AppendByteOrder, v float64) []byte { return o.AppendUint16(nil, uint16(int16(-v))) }},
		{"u4", func(o binary.AppendByteOrder, v float64) []byte { return o.AppendUint32(nil, uint32(v)) }},
		{"i4", func(o binary.AppendByteOrder, v float64) []byte { return o.AppendUint32(nil, uint32(int32(-v))) }},
		{"u8", func(o binary.AppendByteOrder, v float64) []byte { return o.AppendUint64(nil, uint64(v)) }},
		{"i8", func(o binary.AppendByteOrder, v float64) []byte { return o.AppendUint64(nil, uint64(int64(-v))) }},
		{"f4", func(o binary.AppendByteOrder, v float64) []byte {
			return o.AppendUint32(nil, math.Float32bits(float32(v/3)))
		}},
		{"f8", func(o binary.AppendByteOrder, v float64) []byte { return o.AppendUint64(nil, math.Float64bits(v/3)) }},
	} {
		for _, order := range []struct {
			c byte
			o binary.AppendByteOrder
		}{{'<', binary.LittleEndian}, {'>', binary.BigEndian}} {
			var data []byte
			for _, v := range vals {
				data = append(data, c.enc(order.o, v)...)
			}
			descr := string(order.c) + c.descr
			file := rawFile("{'descr': '"+descr+"', 'fortran_order': False, 'shape': (5,), }", data)
			r, err := NewReader(bytes.NewReader(file))
			if err != nil {
				t.Fatalf("%s: %v", descr, err)
			}
			got := make([]float32, 5)
			if _, err := r.Read32(got); err != nil {
				t.Fatalf("%s: %v", descr, err)
			}
			for i, v := range vals {
				want := v
				switch {
				case c.descr == "b1":
					want = float64(b2u(v != 0))
				case c.descr[0] == 'i' && c.descr != "i1":
					want = -v
				case c.descr[0] == 'f':
					want = v / 3
				}
				if math.Abs(float64(got[i])-want) > 1e-6*math.Abs(want) {
					t.Errorf("%s: element %d = %v, want %v", descr, i, got[i], want)
				}
			}
		}
	}
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func TestRejectsBadFiles(t *testing.T) {
	good := rawFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", make([]byte, 16))
	cases := map[string][]byte{
		"empty":             {},
		"magic":             append([]byte("\x93NUMPX"), good[6:]...),
		"version":           append(append([]byte{}, good[:6]...), append([]byte{9, 0}, good[8:]...)...),
		"fortran truncated": rawFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", make([]byte, 20)),
		"dtype c8":          rawFile("{'descr': '<c8', 'fortran_order': False, 'shape': (4,), }", make([]byte, 32)),
		"dtype str":         rawFile("{'descr': '<U3', 'fortran_order': False, 'shape': (4,), }", make([]byte, 48)),
		"no shape":          rawFile("{'descr': '<f4', 'fortran_order': False, }", nil),
		"bad shape":         rawFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4,x), }", nil),
		"truncated":         good[:len(good)-3],
		"short hdr":         good[:20],
	}
	for name, file := range cases {
		r, err := NewReader(bytes.NewReader(file))
		if err == nil {
			_, err = r.Read64(make([]float64, r.Len()))
		}
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if strings.HasSuffix(name, "truncated") && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("truncated: error %v", err)
		}
	}
}

// TestFortranOrder: arrays stored in Fortran order come out in C order,
// for every element size, against the element at each index computed from
// its Fortran offset, read in chunks of odd sizes.
func TestFortranOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, descr := range []string{"|u1", ">i2", "<f4", ">f8"} {
		dt, err := parseDescr(descr)
		if err != nil {
			t.Fatal(err)
		}
		for _, shape := range [][]int{{3, 5}, {2, 3, 4}, {4, 1, 3}, {2, 3, 1, 5}, {1, 6}, {7}} {
			n := 1
			for _, d := range shape {
				n *= d
			}
			vals := make([]float64, n) // by C index
			for i := range vals {
				vals[i] = float64(rng.IntN(100))
			}
			// The file's element at Fortran offset Σ idx[a]·Π_{b<a} shape[b].
			data := make([]byte, n*dt.Size)
			for c := range n {
				rest, off, stride := c, 0, 1
				idx := make([]int, len(shape))
				for a := len(shape) - 1; a >= 0; a-- {
					idx[a], rest = rest%shape[a], rest/shape[a]
				}
				for a := range shape {
					off += idx[a] * stride
					stride *= shape[a]
				}
				e := data[off*dt.Size : (off+1)*dt.Size]
				switch dt.Size {
				case 1:
					e[0] = byte(vals[c])
				case 2:
					dt.Order.PutUint16(e, uint16(vals[c]))
				case 4:
					dt.Order.PutUint32(e, math.Float32bits(float32(vals[c])))
				case 8:
					dt.Order.PutUint64(e, math.Float64bits(vals[c]))
				}
			}
			dict := "{'descr': '" + descr + "', 'fortran_order': True, 'shape': " + ShapeString(shape) + ", }"
			r, err := NewReader(bytes.NewReader(rawFile(dict, data)))
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			for chunk := 1; ; chunk += 2 {
				buf := make([]float64, chunk)
				k, err := r.Read64(buf)
				got = append(got, buf[:k]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for i := range vals {
				if i >= len(got) || got[i] != vals[i] {
					t.Fatalf("%s %v: element %d of %d reads %v, want %v", descr, shape, i, len(got), got[min(i, len(got)-1)], vals[i])
				}
			}
		}
	}
}

// TestNumPyInterop reads files NumPy wrote and has NumPy read ours, where
// python3 with numpy is installed.
func TestNumPyInterop(t *testing.T) {
	py := testutil.Python(t, "numpy")
	dir := t.TempDir()
	script := `
import numpy as np, sys
d = sys.argv[1]
a = np.arange(12, dtype=np.float64).reshape(3, 4) / 7
np.save(d + "/be.npy", a.astype(">f8"))
np.save(d + "/u16.npy", (np.arange(6) * 1000).astype(">u2"))
np.save(d + "/fortran.npy", np.asfortranarray(np.arange(60, dtype=np.float32).reshape(3, 4, 5)))
np.save(d + "/transposed.npy", np.arange(12, dtype=np.int16).reshape(3, 4).T)
b = np.load(d + "/ours.npy")
assert b.dtype == np.float32 and b.shape == (2, 3), (b.dtype, b.shape)
assert np.array_equal(b, np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5), b
`
	// Write ours first.
	f, err := os.Create(filepath.Join(dir, "ours.npy"))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := NewWriter(f, Float32, []int{2, 3})
	w.Write32([]float32{0, 0.5, 1, 1.5, 2, 2.5})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	h, data, err := ReadAll64(filepath.Join(dir, "be.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if ShapeString(h.Shape) != "(3, 4)" || h.Dtype.String() != ">f8" {
		t.Errorf("header %v %v", h.Dtype, h.Shape)
	}
	for i, v := range data {
		if v != float64(i)/7 {
			t.Errorf("be.npy[%d] = %v, want %v", i, v, float64(i)/7)
		}
	}
	_, u, err := ReadAll64(filepath.Join(dir, "u16.npy"))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range u {
		if v != float64(i*1000) {
			t.Errorf("u16.npy[%d] = %v", i, v)
		}
	}
	// Fortran order, as np.save writes asfortranarray and transposes.
	h, fo, err := ReadAll64(filepath.Join(dir, "fortran.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if !h.Fortran {
		t.Errorf("fortran.npy: header %+v does not say Fortran order", h)
	}
	for i, v := range fo {
		if v != float64(i) {
			t.Fatalf("fortran.npy[%d] = %v, want %d", i, v, i)
		}
	}
	h, tr, err := ReadAll64(filepath.Join(dir, "transposed.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if ShapeString(h.Shape) != "(4, 3)" {
		t.Errorf("transposed.npy: shape %v", h.Shape)
	}
	for i, v := range tr { // element (j, k) of the transpose is 4k + j
		if j, k := i/3, i%3; v != float64(4*k+j) {
			t.Fatalf("transposed.npy[%d, %d] = %v, want %d", j, k, v, 4*k+j)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add(rawFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", make([]byte, 16)))
	f.Add(rawFile("{'descr': '>i2', 'fortran_order': False, 'shape': (3,), }", make([]byte, 6)))
	f.Add(rawFile("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", []byte{1}))
	f.Add(EncodeHeader(Float64, []int{1, 0, 5}))
	f.Fuzz(func(t *testing.T, b []byte) {
		// What the reader allocates stays proportional to the file,
		// whatever its header claims.
		defer checkAllocs(t, len(b), 0)()
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		if r.Len() < 0 {
			t.Fatalf("negative length for shape %v", r.Shape)
		}
		buf := make([]float64, 64)
		for {
			if _, err := r.Read64(buf); err != nil {
				return
			}
		}
	})
}

func TestOpenChecksSizeBeforeReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lie.npy")
	// A header promising 10¹² float64 elements over 16 bytes of data.
	if err := os.WriteFile(path, rawFile("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", make([]byte, 16)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAll64(path); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v, want a truncation error before allocating", err)
	}
	ok := filepath.Join(t.TempDir(), "ok.npy")
	os.WriteFile(ok, rawFile("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", make([]byte, 16)), 0o644)
	if _, d, err := ReadAll64(ok); err != nil || len(d) != 2 {
		t.Fatalf("ReadAll64 of a well-formed file: %v, %d elements", err, len(d))
	}
}

func TestMap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.npy")
	f, _ := os.Create(path)
	w, _ := NewWriter(f, Float32, []int{3, 4})
	w.Write32([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m, ok, err := Map[float32](path)
	if err != nil || !ok {
		t.Fatalf("Map: %v, %v", ok, err)
	}
	if len(m.Data) != 12 || m.Data[11] != 11 || ShapeString(m.Shape) != "(3, 4)" {
		t.Errorf("mapped %v %v", m.Shape, m.Data)
	}
	m.Close()
	// Another dtype: not mapped, no error.
	if _, ok, err := Map[float64](path); ok || err != nil {
		t.Errorf("float64 map of a float32 file: %v, %v", ok, err)
	}
}

// TestReadsInChunks reads random values of every float and multi-byte
// integer type, in both byte orders, in chunks of random sizes into float32
// and float64, and sets each value against its own decoding from the
// stored bytes, one at a time. Little-endian floats of the destination's
// size are read straight into it; the rest are converted, big-endian data
// byte-swapped first.
func TestReadsInChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type enc struct {
		descr string
		size  int
		put   func(o binary.ByteOrder, b []byte)
		get   func(o binary.ByteOrder, b []byte) float64
	}
	encs := []enc{
		{"f4", 4, func(o binary.ByteOrder, b []byte) {
			o.PutUint32(b, math.Float32bits(float32(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30)))))
		}, func(o binary.ByteOrder, b []byte) float64 { return float64(math.Float32frombits(o.Uint32(b))) }},
		{"f8", 8, func(o binary.ByteOrder, b []byte) {
			o.PutUint64(b, math.Float64bits(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(600)-300))))
		}, func(o binary.ByteOrder, b []byte) float64 { return math.Float64frombits(o.Uint64(b)) }},
		{"f2", 2, func(o binary.ByteOrder, b []byte) { o.PutUint16(b, uint16(rng.Uint32())) },
			func(o binary.ByteOrder, b []byte) float64 { return halfRef(o.Uint16(b)) }},
		{"i2", 2, func(o binary.ByteOrder, b []byte) { o.PutUint16(b, uint16(rng.Uint32())) },
			func(o binary.ByteOrder, b []byte) float64 { return float64(int16(o.Uint16(b))) }},
		{"u4", 4, func(o binary.ByteOrder, b []byte) { o.PutUint32(b, rng.Uint32()) },
			func(o binary.ByteOrder, b []byte) float64 { return float64(o.Uint32(b)) }},
		{"i8", 8, func(o binary.ByteOrder, b []byte) { o.PutUint64(b, rng.Uint64()) },
			func(o binary.ByteOrder, b []byte) float64 { return float64(int64(o.Uint64(b))) }},
	}
	for _, e := range encs {
		for _, order := range []struct {
			c byte
			o binary.ByteOrder
		}{{'<', binary.LittleEndian}, {'>', binary.BigEndian}} {
			n := 1 + rng.IntN(3000)
			data := make([]byte, n*e.size)
			want := make([]float64, n)
			for i := range n {
				e.put(order.o, data[i*e.size:])
				want[i] = e.get(order.o, data[i*e.size:])
			}
			descr := string(order.c) + e.descr
			file := rawFile(fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }", descr, n), data)
			for _, as64 := range []bool{false, true} {
				r, err := NewReader(bytes.NewReader(file))
				if err != nil {
					t.Fatalf("%s: %v", descr, err)
				}
				for at := 0; at < n; {
					k := min(n-at, 1+rng.IntN(700))
					var got []float64
					if as64 {
						dst := make([]float64, k)
						_, err = r.Read64(dst)
						got = dst
					} else {
						dst := make([]float32, k)
						_, err = r.Read32(dst)
						for _, v := range dst {
							got = append(got, float64(v))
						}
					}
					if err != nil {
						t.Fatalf("%s: %v", descr, err)
					}
					for i, g := range got {
						w := want[at+i]
						if !as64 {
							w = float64(float32(w))
						}
						if g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
							t.Fatalf("%s (float64 %v): element %d = %v, want %v", descr, as64, at+i, g, w)
						}
					}
					at += k
				}
			}
		}
	}
}

// halfRef is the half-precision number of bits h by IEEE 754's
// definition: (−1)^s · 2^(e−15) · (1 + f/1024) for 0 < e < 31,
// (−1)^s · 2⁻¹⁴ · f/1024 for e = 0, ±Inf or NaN for e = 31.
func halfRef(h uint16) float64 {
	s := 1.0
	if h>>15 == 1 {
		s = -1
	}
	e, f := int(h>>10)&31, float64(h&1023)
	switch e {
	case 31:
		if f == 0 {
			return math.Inf(int(s))
		}
		return math.NaN()
	case 0:
		return s * math.Ldexp(f/1024, -14)
	}
	return s * math.Ldexp(1+f/1024, e-15)
}

// TestHalfFloat: every one of the 65,536 float16 bit patterns decodes to
// the number IEEE 754 defines, with its sign (−0 too); NaNs stay NaN.
func TestHalfFloat(t *testing.T) {
	for h := range 1 << 16 {
		got, want := float64(halfFloat(uint16(h))), halfRef(uint16(h))
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("%#04x: %v, want NaN", h, got)
			}
			continue
		}
		if got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("%#04x: %v, want %v", h, got, want)
		}
	}
}

// TestTruncatedCountsMissing: a stream cut short says how many elements
// are missing, read in chunks, by every path (read in place, converted,
// bytes).
func TestTruncatedCountsMissing(t *testing.T) {
	for _, c := range []struct {
		descr string
		size  int
	}{{"<f4", 4}, {">f4", 4}, {"<f8", 8}, {"<i2", 2}, {"|u1", 1}} {
		for _, cut := range []int{1, c.size, c.size + 1, 3 * c.size} {
			const n, chunk = 10, 4
			data := make([]byte, n*c.size-cut)
			file := rawFile(fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }", c.descr, n), data)
			r, err := NewReader(bytes.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			missing := (cut + c.size - 1) / c.size
			var last error
			for read := 0; read < n && last == nil; read += chunk {
				if c.descr == "|u1" {
					_, last = r.ReadU8(make([]uint8, chunk))
				} else {
					_, last = r.Read32(make([]float32, chunk))
				}
			}
			want := fmt.Sprintf("data truncated: %d of %d elements missing", missing, n)
			if last == nil || !errors.Is(last, io.ErrUnexpectedEOF) || !strings.Contains(last.Error(), want) {
				t.Errorf("%s cut by %d bytes: %v, want %q", c.descr, cut, last, want)
			}
		}
	}
}
