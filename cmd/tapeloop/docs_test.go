package main

import (
	"bufio"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/cpukern"
)

// docExample is a command shown in the docs with the output shown after
// it.
type docExample struct {
	where   string // file:line
	command string // after "$ "
	shown   []string
}

// docExamples reads the examples of a Markdown file: in a fenced block, a
// line "$ command" that runs tapeloop, and the lines after it up to the
// next "$ " line or the end of the block, when there are any.
func docExamples(t *testing.T, path string) []docExample {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docExample
	var cur *docExample
	fenced := false
	flush := func() {
		if cur != nil && len(cur.shown) > 0 {
			out = append(out, *cur)
		}
		cur = nil
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			flush()
			fenced = !fenced
		case !fenced:
		case strings.HasPrefix(line, "$ "):
			flush()
			if cmd := line[2:]; strings.HasPrefix(cmd, "tapeloop ") {
				cur = &docExample{where: filepath.Base(path) + ":" + strconv.Itoa(n), command: cmd}
			}
		case cur != nil:
			cur.shown = append(cur.shown, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameLine reports whether a line the docs show matches one the program
// printed: the same text, where exact; else the same words, numbers
// within a relative 1e-5 (the last digits of a sum depend on the
// instruction set its kernels add in).
func sameLine(shown, got string, exact bool) bool {
	if shown == got {
		return true
	}
	if exact {
		return false
	}
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == ':' || r == '=' })
	}
	a, b := split(shown), split(got)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		x, err1 := strconv.ParseFloat(a[i], 64)
		y, err2 := strconv.ParseFloat(b[i], 64)
		if err1 != nil || err2 != nil || math.Abs(x-y) > 1e-5*math.Max(math.Abs(x), math.Abs(y)) {
			return false
		}
	}
	return true
}

// TestDocsExamples runs every example of README.md and docs/*.md as a
// user pastes it (bash, in a fresh directory, the tapeloop built for the
// tests first on PATH) and checks that the output the docs show is what
// the program prints: each shown line, in order, among the lines printed
// (standard output and error together). The digits shown are an AVX-512
// machine's: on one, they must be the same; elsewhere numbers may differ
// in their last digits.
func TestDocsExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every example of the docs")
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	exact := cpukern.PairDistISA() == "avx512f"
	env := append(os.Environ(), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
	count := 0
	for _, path := range files {
		for _, ex := range docExamples(t, path) {
			count++
			cmd := exec.Command("bash", "-c", ex.command)
			cmd.Dir = t.TempDir()
			cmd.Env = env
			out, _ := cmd.CombinedOutput() // examples of errors exit 1
			got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			k := 0
			for _, want := range ex.shown {
				for k < len(got) && !sameLine(want, got[k], exact) {
					k++
				}
				if k == len(got) {
					t.Errorf("%s: $ %s\nthe docs show the line\n\t%s\nwhich is not in what it prints:\n\t%s",
						ex.where, ex.command, want, strings.Join(got, "\n\t"))
					break
				}
				k++
			}
		}
	}
	if count < 10 {
		t.Errorf("found %d examples in the docs, want at least 10", count)
	}
}
