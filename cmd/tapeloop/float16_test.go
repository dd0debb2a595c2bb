package main

import (
	"bytes"
	bin "encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// half16 is the float16 bits of v, a number k/256 with 0 < |k| ≤ 2048
// (exact in float16: at most 11 significant bits, exponent −8 to 3).
func half16(v float64) uint16 {
	if v == 0 {
		return 0
	}
	var sign uint16
	if v < 0 {
		sign, v = 0x8000, -v
	}
	m, e := math.Frexp(v) // v = m·2^e, m in [½, 1)
	return sign | uint16(e-1+15)<<10 | uint16((2*m-1)*1024)
}

// TestFloat16Inputs: float16 .npy files (NumPy's half precision, both
// byte orders) are read as the numbers they hold: each workload gives,
// byte for byte, what it gives for the same numbers stored as float32
// (interp's queries: float64).
func TestFloat16Inputs(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	rng := rand.New(rand.NewPCG(16, 17))
	values := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			k := 0
			for k == 0 {
				k = rng.IntN(4097) - 2048
			}
			v[i] = float64(k) / 256
		}
		return v
	}
	save := func(name string, shape []int, v []float64, big bool) {
		data := make([]byte, 2*len(v))
		var o bin.ByteOrder = bin.LittleEndian
		descr := "<f2"
		if big {
			o, descr = bin.BigEndian, ">f2"
		}
		for i, x := range v {
			o.PutUint16(data[2*i:], half16(x))
		}
		s := fmt.Sprint(shape[0])
		for _, d := range shape[1:] {
			s += fmt.Sprintf(", %d", d)
		}
		if len(shape) == 1 {
			s += ","
		}
		if err := os.WriteFile(p(name), rawNpy(npyDict(descr, "("+s+")", false), data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save32 := func(name string, dt npy.Dtype, shape []int, v []float64) {
		if err := os.WriteFile(p(name), npyOf(dt, shape, v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	same := func(what, a, b string) {
		t.Helper()
		x, err1 := os.ReadFile(a)
		y, err2 := os.ReadFile(b)
		if err1 != nil || err2 != nil || len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s: the float16 run's output differs from the float32 run's (%v, %v)", what, err1, err2)
		}
	}
	runOK := func(args ...string) {
		t.Helper()
		if _, se, code := run(t, append(args, "--quiet")...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, se)
		}
	}
	images := values(9 * 5 * 7)
	save("im16.npy", []int{9, 5, 7}, images, true)
	save32("im32.npy", npy.Float32, []int{9, 5, 7}, images)
	runOK("affinity", "--images", p("im16.npy"), "--metric", "l2", "--out", p("a16.npy"))
	runOK("affinity", "--images", p("im32.npy"), "--metric", "l2", "--out", p("a32.npy"))
	same("affinity", p("a16.npy"), p("a32.npy"))

	vol := values(11 * 12 * 13)
	save("v16.npy", []int{11, 12, 13}, vol, false)
	save32("v32.npy", npy.Float32, []int{11, 12, 13}, vol)
	for _, b := range []string{"reflect", "wrap"} {
		runOK("wavelet", "--volume", p("v16.npy"), "--theta", "0.4", "--phi", "0.2,1", "--xi", "1.5", "--boundary", b, "--out", p("w16.csv"))
		runOK("wavelet", "--volume", p("v32.npy"), "--theta", "0.4", "--phi", "0.2,1", "--xi", "1.5", "--boundary", b, "--out", p("w32.csv"))
		same("wavelet "+b, p("w16.csv"), p("w32.csv"))
	}

	f := values(4 * 33)
	x := values(57)
	for i := range x {
		x[i] = math.Abs(x[i]) / 8 // in [0, 1]: within the grid of 33 points 1/32 apart
	}
	save("f16.npy", []int{4, 33}, f, true)
	save32("f32.npy", npy.Float32, []int{4, 33}, f)
	save("x16.npy", []int{57}, x, false)
	save32("x64.npy", npy.Float64, []int{57}, x)
	runOK("interp", "--f", p("f16.npy"), "--x", p("x16.npy"), "--dx", "0.03125", "--reduce", "none", "--out", p("y16.npy"))
	runOK("interp", "--f", p("f32.npy"), "--x", p("x64.npy"), "--dx", "0.03125", "--reduce", "none", "--out", p("y32.npy"))
	same("interp", p("y16.npy"), p("y32.npy"))
}
