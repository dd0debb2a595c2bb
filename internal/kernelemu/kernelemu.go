// Package kernelemu runs CUDA C kernels on the CPU, for tests on machines
// without a GPU: the kernels are compiled with g++ into one program
// against the emulator of cuda/kernels/emu (each block's threads are
// std::threads, __syncthreads a barrier, __shared__ arrays statics), and
// each launch runs that program with its arguments in files. It checks a
// kernel's arithmetic and indexing, not its speed or a GPU's rounding.
package kernelemu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoCompiler is returned by Build where g++ is not installed.
var ErrNoCompiler = errors.New("kernelemu: g++ not installed")

// Kernel is one kernel to emulate: its name, its source (several kernels'
// sources are concatenated into one program), the C type of each of its
// parameters, and its threads per block.
type Kernel struct {
	Name, Src string
	Params    []string
	Block     int
}

// Emulator is the program built from the kernels.
type Emulator struct {
	bin     string
	kernels map[string]Kernel
}

// Build compiles the kernels with g++ against emu.h in emuDir (the
// repository's cuda/kernels/emu), in a temporary directory of dir's.
func Build(emuDir, dir string, kernels []Kernel) (*Emulator, error) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		return nil, ErrNoCompiler
	}
	e := &Emulator{bin: filepath.Join(dir, "emu"), kernels: map[string]Kernel{}}
	var src strings.Builder
	src.WriteString("#include \"emu.h\"\n#include <cstdio>\n#include <cstdlib>\n#include <string>\n")
	for _, k := range kernels {
		if _, ok := e.kernels[k.Name]; ok {
			continue
		}
		e.kernels[k.Name] = k
		src.WriteString(k.Src)
	}
	src.WriteString(emuMain)
	src.WriteString("static int dispatch(const std::string &k, unsigned gx, unsigned gy, unsigned block, int nargs) {\n")
	for name, k := range e.kernels {
		var args []string
		for i, t := range k.Params {
			switch t {
			case "long long":
				args = append(args, fmt.Sprintf("La(%d)", i))
			case "double":
				args = append(args, fmt.Sprintf("Da(%d)", i))
			default:
				args = append(args, fmt.Sprintf("(%s)Pa(%d)", t, i))
			}
		}
		fmt.Fprintf(&src, "  if (k == %q) {\n    if (nargs != %d) return -2;\n    emu_launch(gx, gy, block, [] { %s(%s); });\n    return 0;\n  }\n",
			name, len(k.Params), name, strings.Join(args, ", "))
	}
	src.WriteString("  return -1;\n}\n")
	main := filepath.Join(dir, "main.cc")
	if err := os.WriteFile(main, []byte(src.String()), 0o600); err != nil {
		return nil, err
	}
	if out, err := exec.Command(gxx, "-std=c++20", "-O1", "-I", emuDir, "-o", e.bin, main, "-pthread").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kernelemu: compiling the kernels: %v\n%s", err, out)
	}
	return e, nil
}

// emuMain reads a launch from the command line: KERNEL GX GY BLOCK ARG…,
// each ARG p:FILE (a buffer, read from FILE and written back after the
// kernel), l:INT or d:FLOAT (C's strtod: hexadecimal keeps every bit).
const emuMain = `
static std::vector<std::vector<char>> bufs;
static std::vector<long long> longs;
static std::vector<double> dbls;
static void *Pa(int i) { return bufs[i].data(); }
static long long La(int i) { return longs[i]; }
static double Da(int i) { return dbls[i]; }
static int dispatch(const std::string &k, unsigned gx, unsigned gy, unsigned block, int nargs);
int main(int argc, char **argv) {
  if (argc < 5) return 2;
  int n = argc - 5;
  bufs.resize(n);
  longs.resize(n);
  dbls.resize(n);
  for (int i = 0; i < n; i++) {
    const char *a = argv[5 + i];
    if (a[0] == 'p') {
      FILE *f = fopen(a + 2, "rb");
      if (!f) return 3;
      fseek(f, 0, SEEK_END);
      long sz = ftell(f);
      fseek(f, 0, SEEK_SET);
      bufs[i].resize(sz);
      if (fread(bufs[i].data(), 1, sz, f) != (size_t)sz) return 4;
      fclose(f);
    } else if (a[0] == 'l') {
      longs[i] = atoll(a + 2);
    } else {
      dbls[i] = strtod(a + 2, 0);
    }
  }
  int r = dispatch(argv[1], atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), n);
  if (r == -1) { fprintf(stderr, "no kernel %s\n", argv[1]); return 5; }
  if (r == -2) { fprintf(stderr, "%d arguments do not match %s's parameters\n", n, argv[1]); return 5; }
  for (int i = 0; i < n; i++) {
    const char *a = argv[5 + i];
    if (a[0] != 'p') continue;
    FILE *f = fopen(a + 2, "wb");
    if (!f || fwrite(bufs[i].data(), 1, bufs[i].size(), f) != bufs[i].size()) return 6;
    fclose(f);
  }
  return 0;
}
`

// Run launches kernel name over gx×gy blocks, in dir. Each argument is an
// int64, a float64, or a buffer ([]float32, []float64, []int32, standing
// for a device pointer to its first element): buffers are copied in and
// back out, so a kernel's writes land in them.
func (e *Emulator) Run(dir, name string, gx, gy int, args ...any) error {
	k, ok := e.kernels[name]
	if !ok {
		return fmt.Errorf("kernelemu: no kernel %s", name)
	}
	argv := []string{name, fmt.Sprint(gx), fmt.Sprint(gy), fmt.Sprint(k.Block)}
	files := map[int]string{}
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			argv = append(argv, fmt.Sprintf("l:%d", v))
		case float64:
			argv = append(argv, fmt.Sprintf("d:%x", v))
		case []float32, []float64, []int32:
			f := filepath.Join(dir, fmt.Sprintf("arg%d", i))
			b, err := binary.Append(nil, binary.LittleEndian, v)
			if err != nil {
				return err
			}
			if err := os.WriteFile(f, b, 0o600); err != nil {
				return err
			}
			argv = append(argv, "p:"+f)
			files[i] = f
		default:
			return fmt.Errorf("kernelemu: argument %d of %s is a %T", i, name, a)
		}
	}
	if out, err := exec.Command(e.bin, argv...).CombinedOutput(); err != nil {
		return fmt.Errorf("kernelemu: running %s: %v\n%s", name, err, out)
	}
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if _, err := binary.Decode(b, binary.LittleEndian, args[i]); err != nil {
			return err
		}
	}
	return nil
}
