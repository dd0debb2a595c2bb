package filejob

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckPathsFilesOfInputs: an output that is (or links to) a file read
// for an input (Path.Of) is refused, naming both; in an output directory
// with Names, the files of those names are outputs too, and no other
// output may take such a name there.
func TestCheckPathsFilesOfInputs(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	for _, n := range []string{"v.mhd", "v.raw"} {
		if err := os.WriteFile(p(n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(p("out"), 0o755)
	if err := os.Symlink("../v.raw", p("out/p_1.png")); err != nil {
		t.Fatal(err)
	}
	inputs := []Path{{Flag: "volume", Path: p("v.mhd")}, {Flag: "volume", Path: p("v.raw"), Of: p("v.mhd")}}
	pngs := func(name string) bool { return strings.HasPrefix(name, "p_") && strings.HasSuffix(name, ".png") }
	for i, c := range []struct {
		outs []Path
		want string // "": allowed
	}{
		{[]Path{{Flag: "out", Path: p("v.raw")}}, "--out " + p("v.raw") + ": is " + p("v.raw") + ", a file of the input --volume " + p("v.mhd")},
		{[]Path{{Flag: "report", Path: p("out/p_1.png")}}, "a file of the input --volume"},
		{[]Path{{Flag: "out", Path: p("out"), Dir: true, Names: pngs}}, "--out " + p("out/p_1.png") + ": is " + p("v.raw")},
		{[]Path{{Flag: "out", Path: p("out"), Dir: true}}, ""},
		{[]Path{{Flag: "out", Path: p("new"), Dir: true, Names: pngs}, {Flag: "report", Path: p("new/p_7.png")}}, "--report " + p("new/p_7.png") + ": is also a file of --out " + p("new")},
		{[]Path{{Flag: "out", Path: p("new"), Dir: true, Names: pngs}, {Flag: "report", Path: p("new/r.json")}}, ""},
	} {
		err := CheckPaths(inputs, c.outs)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("case %d: %v, want allowed", i, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("case %d: %v, want %q", i, err, c.want)
		}
	}
}
