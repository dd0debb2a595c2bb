package kernelemu

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

var (
	entryRE = regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(([^)]*)\)`)
	ptxArg  = regexp.MustCompile(`\.param\s`)
)

// The emulator finds every kernel nvcc compiled, with as many parameters:
// the signatures it reads from kernels/*.cu against the entries of the
// committed PTX.
func TestParseFindsEveryKernel(t *testing.T) {
	dir := filepath.Join("..", "..", "cuda", "kernels")
	files, err := fs.Glob(os.DirFS(dir), "*.cu")
	if err != nil || len(files) == 0 {
		t.Fatalf("no kernel sources: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		ks, err := parseKernels(string(src))
		if err != nil {
			t.Fatal(err)
		}
		ptx, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(f, ".cu")+".ptx"))
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, k := range ks {
			got = append(got, k.name+"/"+strconv.Itoa(len(k.params)))
		}
		for _, m := range entryRE.FindAllStringSubmatch(string(ptx), -1) {
			want = append(want, m[1]+"/"+strconv.Itoa(len(ptxArg.FindAllString(m[2], -1))))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: kernels/parameters %v, the PTX has %v", f, got, want)
		}
	}
}

func TestParseSignatures(t *testing.T) {
	ks, err := parseKernels(`
// extern "C" __global__ void commented(long n) {}
#define B __launch_bounds__(256, 2)
extern "C" __global__ void B tiled(const float *a, long m, float2 *half, double s, long long n) {}
extern "C" __global__ void __launch_bounds__(128) bounded(const int * start,double x) {}
extern "C" __global__ void none() {}
static __device__ void helper(float *x) {}`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range ks {
		got = append(got, k.name+"("+strings.Join(k.params, ", ")+")")
	}
	want := "tiled(const float *, long, float2 *, double, long long) bounded(const int *, double) none()"
	if strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
	if _, err := parseKernels(`extern "C" __global__ void f(float s) {}`); err == nil {
		t.Error("a float parameter (4 bytes, not a launch's 8-byte word) accepted")
	}
}

func mustCompile(t *testing.T, srcs ...string) *Program {
	t.Helper()
	p, err := Compile(srcs...)
	if errors.Is(err, ErrNoCompiler) {
		t.Skip("g++ not installed")
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const testSrc = `
// y[i] = s·x[i] + block's sum of x (in shared memory, after a barrier)
extern "C" __global__ void axpb(const float *x, float *y, long n, double s) {
  __shared__ float sum[1];
  if (threadIdx.x == 0) {
    sum[0] = 0;
    for (long j = blockIdx.x * blockDim.x; j < n && j < (long)(blockIdx.x + 1) * blockDim.x; j++) sum[0] += x[j];
  }
  __syncthreads();
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (float)(s * x[i]) + sum[0];
}
extern "C" __global__ void overrun(float *y, long n) { y[n + threadIdx.x] = 1; }
`

// Kernels compiles the *.cu files of the file system it is given, once:
// other files are left out, and a second call returns the same Program.
func TestKernelsOfFS(t *testing.T) {
	src := fstest.MapFS{
		"a.cu":      {Data: []byte(testSrc)},
		"notes.txt": {Data: []byte("not CUDA")},
		"sub/b.cu":  {Data: []byte(`extern "C" __global__ void nested(long n) {}`)},
	}
	p, err := Kernels(src)
	if errors.Is(err, ErrNoCompiler) {
		t.Skip("g++ not installed")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Kernels(), " "); got != "axpb overrun" {
		t.Errorf("kernels %q, want those of a.cu only", got)
	}
	if q, err := Kernels(src); err != nil || q != p {
		t.Errorf("second call: %p, %v; want the first Program %p", q, err, p)
	}
	if _, err := Kernels(fstest.MapFS{}); err == nil {
		t.Error("no *.cu files accepted")
	}
}

// Run copies buffers in and out and reads every argument; launches of the
// wrong kernel, with the wrong arguments or writing outside a buffer fail.
func TestRun(t *testing.T) {
	p := mustCompile(t, testSrc, testSrc) // the same source twice counts once
	if got := strings.Join(p.Kernels(), " "); got != "axpb overrun" {
		t.Fatalf("kernels %q", got)
	}
	x := []float32{1, 2, 3, 4, 5}
	y := make([]float32, 5)
	if err := p.Run("axpb", 2, 1, 4, x, y, int64(5), 0.5); err != nil {
		t.Fatal(err)
	}
	want := []float32{10.5, 11, 11.5, 12, 7.5}
	for i := range y {
		if y[i] != want[i] {
			t.Fatalf("y = %v, want %v", y, want)
		}
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown kernel", p.Run("nope", 1, 1, 1), "no kernel"},
		{"argument count", p.Run("axpb", 1, 1, 1, x, y), "do not match"},
		{"argument type", p.Run("axpb", 1, 1, 1, x, y, 5, 0.5), "is a int"},
		{"write past the end", p.Run("overrun", 1, 1, 2, y, int64(5)), "wrote outside"},
		{"write before the start", p.Run("overrun", 1, 1, 1, y, int64(-1)), "wrote outside"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", c.name, c.err, c.want)
		}
	}
	if _, err := Compile(`extern "C" __global__ void axpb(float *y) {}`, testSrc); err == nil || !strings.Contains(err.Error(), "two kernels") {
		t.Errorf("two kernels of one name: %v", err)
	}
}
