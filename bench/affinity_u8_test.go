package bench

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// BenchmarkAffinityU8Process times whole `tapeloop affinity` processes,
// start to exit (reading the images, computing, writing and syncing the
// (N, N) matrix), on the same random 8-bit images: stored as uint8 with
// --dtype int32 and float64 (exact, in integers), and stored as float32
// with --dtype float32 (the float32 kernels), dot, interleaved round by
// round. It reports each one's min and median seconds and the float32
// path's time over each exact one's, per round (min and median). A fourth
// run, "floor", writes the same int32 matrix from images of 4 values: the
// process with next to no products to compute (start-up, reading, the
// matrix's pages and its rename), so float32/floor is the most the 8-bit
// path could gain over the float32 one on this machine with a kernel of no
// cost. Sizes: BENCH_U8_N and BENCH_U8_D (default 6000 images of 4096
// values; with -short 1500 images and one round); rounds: -benchtime Nx
// times BENCH_U8_REPS (default 3).
func BenchmarkAffinityU8Process(b *testing.B) {
	n, d, reps := envInt("BENCH_U8_N", 6000), envInt("BENCH_U8_D", 4096), envInt("BENCH_U8_REPS", 3)
	if testing.Short() {
		n, reps = envInt("BENCH_U8_N", 1500), envInt("BENCH_U8_REPS", 1)
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "tapeloop")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/tapeloop").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]uint8, n*d)
	for i := range x {
		x[i] = uint8(rng.IntN(256))
	}
	u8, f32 := filepath.Join(dir, "u8.npy"), filepath.Join(dir, "f32.npy")
	hdr := npy.EncodeHeader(npy.Dtype{Kind: 'u', Size: 1, Order: binary.LittleEndian}, []int{n, d})
	if err := os.WriteFile(u8, append(hdr, x...), 0o644); err != nil {
		b.Fatal(err)
	}
	f := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(f[4*i:], math.Float32bits(float32(v)))
	}
	if err := os.WriteFile(f32, append(npy.EncodeHeader(npy.Float32, []int{n, d}), f...), 0o644); err != nil {
		b.Fatal(err)
	}
	f = nil
	floor := filepath.Join(dir, "floor.npy")
	d4 := min(4, d)
	hdr4 := npy.EncodeHeader(npy.Dtype{Kind: 'u', Size: 1, Order: binary.LittleEndian}, []int{n, d4})
	if err := os.WriteFile(floor, append(hdr4, x[:d4*n]...), 0o644); err != nil {
		b.Fatal(err)
	}
	runs := []struct {
		name, in, dtype string
		secs            []float64
	}{{"float32", f32, "float32", nil}, {"int32", u8, "int32", nil}, {"float64", u8, "float64", nil},
		{"floor", floor, "int32", nil}}
	out := func(name string) string { return filepath.Join(dir, "A-"+name+".npy") }
	checked := false
	for b.Loop() {
		for range reps {
			for i := range runs {
				r := &runs[i]
				cmd := exec.Command(bin, "affinity", "--quiet", "--images", r.in, "--metric", "dot", "--dtype", r.dtype, "--out", out(r.name))
				t0 := time.Now()
				if o, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v\n%s", r.name, err, o)
				}
				r.secs = append(r.secs, time.Since(t0).Seconds())
			}
			if !checked { // the two exact outputs hold the same integers
				checked = true
				checkSameInts(b, out("int32"), out("float64"), n)
			}
		}
	}
	for _, r := range runs {
		s := slices.Sorted(slices.Values(r.secs))
		b.ReportMetric(s[0], r.name+"-s-min")
		b.ReportMetric(median(r.secs), r.name+"-s-median")
	}
	for _, r := range runs[1:] {
		var ratio []float64
		for i := range r.secs {
			ratio = append(ratio, runs[0].secs[i]/r.secs[i])
		}
		s := slices.Sorted(slices.Values(ratio))
		b.ReportMetric(s[0], "float32/"+r.name+"-min")
		b.ReportMetric(median(ratio), "float32/"+r.name+"-median")
	}
}

// checkSameInts fails unless the int32 and float64 (N, N) files hold the
// same values.
func checkSameInts(b *testing.B, i32, f64 string, n int) {
	a, err := os.ReadFile(i32)
	if err != nil {
		b.Fatal(err)
	}
	c, err := os.ReadFile(f64)
	if err != nil {
		b.Fatal(err)
	}
	ha, hc := npy.EncodeHeader(npy.Int32, []int{n, n}), npy.EncodeHeader(npy.Float64, []int{n, n})
	if !bytes.HasPrefix(a, ha) || !bytes.HasPrefix(c, hc) || len(a)-len(ha) != 4*n*n || len(c)-len(hc) != 8*n*n {
		b.Fatal("the outputs are not (N, N) int32 and float64 .npy files")
	}
	a, c = a[len(ha):], c[len(hc):]
	for i := range n * n {
		v, w := int32(binary.LittleEndian.Uint32(a[4*i:])), math.Float64frombits(binary.LittleEndian.Uint64(c[8*i:]))
		if float64(v) != w {
			b.Fatalf("element %d: int32 %d, float64 %v", i, v, w)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
