package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// cType is the C type cgo writes for a Go parameter or result type of an
// exported function.
func cType(t *testing.T, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return cType(t, e.X) + "*"
	case *ast.SelectorExpr:
		pkg := e.X.(*ast.Ident).Name
		switch {
		case pkg == "unsafe" && e.Sel.Name == "Pointer":
			return "void*"
		case pkg == "C":
			return e.Sel.Name
		}
	}
	t.Fatalf("an exported function's type %T has no C type here", e)
	return ""
}

// squeeze drops the spaces around '*' and runs of spaces, so that
// "char *p" and "char* p" read alike.
func squeeze(s string) string {
	s = regexp.MustCompile(`\s*\*\s*`).ReplaceAllString(s, "* ")
	s = regexp.MustCompile(`\s+`).ReplaceAllString(s, " ")
	return strings.ReplaceAll(strings.TrimSpace(s), "* )", "*)")
}

// TestHeaderMatchesExports: capi/tapeloop.h declares every function the
// library exports, with the types cgo gives it, and nothing else.
func TestHeaderMatchesExports(t *testing.T) {
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*.go")
	var exported []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Doc == nil || !slices.ContainsFunc(fn.Doc.List, func(c *ast.Comment) bool { return c.Text == "//export "+fn.Name.Name }) {
				continue
			}
			var params []string
			for _, p := range fn.Type.Params.List {
				for _, n := range p.Names {
					params = append(params, cType(t, p.Type)+" "+n.Name)
				}
			}
			res := "void"
			if r := fn.Type.Results; r != nil {
				res = cType(t, r.List[0].Type)
			}
			exported = append(exported, squeeze(res+" "+fn.Name.Name+"("+strings.Join(params, ", ")+");"))
		}
	}
	h, err := os.ReadFile("tapeloop.h")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, m := range regexp.MustCompile(`(?m)^(?:char|void)\s*\*?\s*tl_\w+\([^)]*\);`).FindAllString(string(h), -1) {
		declared = append(declared, squeeze(m))
	}
	slices.Sort(exported)
	slices.Sort(declared)
	if len(exported) < 19 {
		t.Fatalf("found %d exported functions, fewer than the ABI has", len(exported))
	}
	for _, e := range exported {
		if !slices.Contains(declared, e) {
			t.Errorf("exported, not declared as such in tapeloop.h: %s", e)
		}
	}
	for _, d := range declared {
		if !slices.Contains(exported, d) {
			t.Errorf("declared in tapeloop.h, not exported so: %s", d)
		}
	}
	if !strings.Contains(string(h), `#define TAPELOOP_ABI "`+Version+`"`) {
		t.Errorf("tapeloop.h's TAPELOOP_ABI is not %q", Version)
	}
}
