package nvrtc

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// loaded skips where the library cannot be loaded.
func loaded(t *testing.T) {
	t.Helper()
	if err := Load(); err != nil {
		t.Skipf("no libnvrtc here: %v", err)
	}
}

func TestCompile(t *testing.T) {
	loaded(t)
	major, minor, err := Version()
	if err != nil {
		t.Fatal(err)
	}
	arch, err := ArchFor(80)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC %d.%d, %s", major, minor, arch)
	src := `extern "C" __global__ void twice(float *x, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2.0f * expf(x[i]) + (float)__longlong_as_double(0x7ff0000000000000LL) * 0.0f + (0x1.8p+01);
}
`
	ptx, err := Compile(src, "twice.cu", []string{arch, "--fmad=false", "--std=c++17"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ptx, ".visible .entry twice(") {
		t.Errorf("the PTX has no entry twice:\n%s", ptx)
	}
}

func TestCompileError(t *testing.T) {
	loaded(t)
	_, err := Compile(`extern "C" __global__ void bad(float *x) { x[0] = undefined_name; }`, "bad.cu", nil)
	if err == nil || !errors.Is(err, ErrNVRTC) || !strings.Contains(err.Error(), "undefined_name") {
		t.Errorf("error %v, want one wrapping ErrNVRTC that quotes the log", err)
	}
}

func TestArchFor(t *testing.T) {
	loaded(t)
	archs, err := Archs()
	if err != nil {
		t.Fatal(err)
	}
	if archs == nil {
		t.Skip("this libnvrtc does not list its architectures")
	}
	// A device newer than every listed architecture gets the newest.
	top := archs[len(archs)-1]
	if got, _ := ArchFor(top + 50); !strings.HasSuffix(got, "_"+strconv.Itoa(top)) {
		t.Errorf("ArchFor(%d) = %s, want compute_%d", top+50, got, top)
	}
	if _, err := ArchFor(archs[0] - 1); err == nil {
		t.Errorf("ArchFor(%d) accepted a device older than every architecture", archs[0]-1)
	}
}
