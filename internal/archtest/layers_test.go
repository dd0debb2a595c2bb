package archtest

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tapeloop/tapeloop/"

// A rule forbids the packages matching from to import those matching
// any of not: directly, or also through other packages when deps is set.
// Patterns are paths inside the module; one ending in "/..." matches the
// package and everything below it.
type rule struct {
	from string
	not  []string
	deps bool
	why  string
}

var rules = []rule{
	{"internal/...", []string{"cuda/..."}, false,
		"the layers below the GPU backend are handed what they need of it (kernelemu gets the kernel sources from its caller)"},
	{"internal/cpukern/...", []string{"internal/volume/...", "internal/npy/...", "internal/stackfile/..."}, true,
		"the C kernels take plain arrays and geometry, not what the readers return"},
	{"internal/engine/...", []string{"graphs/...", "internal/filejob/..."}, true,
		"the engine is the bottom layer and knows no workload and no file layer"},
	{"internal/engine/...", []string{"internal/cpukern/...", "internal/fft3/..."}, false,
		"what the kernels report (tapeloop info) is printed by the CLI, not the engine"},
	{"graphs/...", []string{"internal/filejob/...", "capi/...", "cmd/..."}, true,
		"workloads know nothing of files, the C ABI or the CLI"},
	{"internal/plot/...", []string{"graphs/...", "ops/...", "internal/engine/...", "internal/filejob/...", "cuda/..."}, true,
		"figures are drawn from the files the workloads write, with no workload or engine linked"},
	{"ops/...", []string{"graphs/...", "internal/engine/...", "internal/filejob/...", "cmd/...", "capi/..."}, true,
		"ops are below the workloads and the engine"},
}

func match(pattern, pkg string) bool {
	pkg, ok := strings.CutPrefix(pkg, module)
	if !ok {
		return false
	}
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	}
	return pkg == pattern
}

// pkg is one package as go list sees it under a set of build tags.
type pkg struct {
	path          string
	imports, deps []string
}

// list runs go list over the module with tags and returns its packages
// (non-test files only: test imports are free).
func list(t *testing.T, tags string) []pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	cmd := exec.Command(gobin, "list", "-e", "-tags", tags, "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags %q: %v\n%s", tags, err, stderr.String())
	}
	var ps []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		ps = append(ps, pkg{f[0], strings.Fields(f[1]), strings.Fields(f[2])})
	}
	if len(ps) < 10 {
		t.Fatalf("go list -tags %q: only %d packages", tags, len(ps))
	}
	return ps
}

// watch lists the module's directories and stats its Go files, so that
// go test's cache, which knows nothing of what go list read, reruns the
// test when an import changes.
func watch(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir():
			_, err := os.ReadDir(p)
			return err
		case strings.HasSuffix(p, ".go") || d.Name() == "go.mod":
			_, err := os.Stat(p)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The layers import downwards only, under every build: the default, the
// emulated GPU and the real one (go list needs no CUDA toolkit).
func TestImportDirections(t *testing.T) {
	watch(t, filepath.Join("..", ".."))
	for _, tags := range []string{"", "tapeloop_cudaemu", "tapeloop_cuda"} {
		for _, p := range list(t, tags) {
			for _, r := range rules {
				if !match(r.from, p.path) {
					continue
				}
				for _, imp := range p.imports {
					for _, n := range r.not {
						if match(n, imp) {
							t.Errorf("tags %q: %s imports %s: %s", tags, p.path, imp, r.why)
						}
					}
				}
				if !r.deps {
					continue
				}
				for _, d := range p.deps {
					if slices.Contains(p.imports, d) {
						continue // said above
					}
					for _, n := range r.not {
						if match(n, d) {
							t.Errorf("tags %q: %s depends on %s through its imports (go list -deps): %s", tags, p.path, d, r.why)
						}
					}
				}
			}
		}
	}
}
