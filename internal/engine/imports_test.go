package engine_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEngineImportsNoWorkload: the engine, and every package of this
// module it imports, directly or not, under any build tag, imports no
// workload (graphs/...) and not the file layer (internal/filejob): the
// workloads build on the engine, never the other way round.
func TestEngineImportsNoWorkload(t *testing.T) {
	const module = "github.com/tapeloop/tapeloop/"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{"internal/engine": ""} // package → the package that imports it
	queue := []string{"internal/engine"}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("package %s: no Go files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				dep, ok := strings.CutPrefix(path, module)
				if !ok {
					continue
				}
				if strings.HasPrefix(dep, "graphs/") || dep == "internal/filejob" {
					chain := pkg // how the engine comes to import pkg
					for p := seen[pkg]; p != ""; p = seen[p] {
						chain = p + " → " + chain
					}
					t.Errorf("%s imports %s (%s)", pkg, dep, chain)
				}
				if _, done := seen[dep]; !done {
					if _, err := os.Stat(filepath.Join(root, dep)); err == nil {
						seen[dep] = pkg
						queue = append(queue, dep)
					}
				}
			}
		}
	}
	if len(seen) < 3 {
		t.Errorf("only %d packages walked: the walk does not follow the imports", len(seen))
	}
}
