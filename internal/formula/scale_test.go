package formula

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/testutil"
)

// The size of a formula: compiling is linear in its length (a sum of
// 100,000 terms compiles in about a second), nesting has a limit, and an
// error about a long formula quotes the part around its column.

// compileAll runs every step an affinity formula goes through before a
// run: parse, the plans over dot products and direct, the symmetry test,
// and the GPU's kernel source.
func compileAll(tb testing.TB, src string) *Formula {
	tb.Helper()
	f, err := Parse(src, pairEnv)
	if err != nil {
		tb.Fatal(err)
	}
	for _, direct := range []bool{false, true} {
		plan, err := CompilePair(f, 16, direct)
		if err != nil {
			tb.Fatal(err)
		}
		if plan.PairGraph != nil {
			if _, err := plan.CUDAPair(); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if _, err := Symmetric(f); err != nil {
		tb.Fatal(err)
	}
	return f
}

// joined is k copies of term joined by op.
func joined(term, op string, k int) string {
	return strings.Repeat(term+op, k-1) + term
}

// evalPair evaluates f over the images a and b with the evaluator, the
// whole formula as one program (no row values, no dot products).
func evalPair(t *testing.T, f *Formula, a, b []float64) float64 {
	t.Helper()
	g, err := f.Graph(len(a))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Lower(g, []int{0, 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	s := cpukern.NewFxState[float64](p)
	s.Run(len(a), [][]float64{a, b}, nil)
	return s.Regs[p.Result]
}

// TestFormulaLong: formulas of 100,000 terms compile and compute what a
// closed form says they do, and compiling one is linear in its length: a
// formula ten times as long takes at most fifteen times the allocations
// and allocated bytes (a quadratic step would take a hundred). The work is
// counted, not timed, so that it holds on a loaded machine.
func TestFormulaLong(t *testing.T) {
	if testutil.Race {
		t.Skip("single-goroutine compiling, many times slower under the race detector: the plain run checks it")
	}
	a := []float64{0.5, 1.25, -2, 3, 0.125, 7, -1.5, 2.5, 0.75}
	b := []float64{1, -0.5, 2, 0.25, 4, -3, 1.5, 0.5, -2.25}
	var sa, sb, ab, sq, maxA float64
	maxA = math.Inf(-1)
	for i := range a {
		sa, sb, ab, sq = sa+a[i], sb+b[i], ab+a[i]*b[i], sq+(a[i]-b[i])*(a[i]-b[i])
		maxA = max(maxA, a[i])
	}
	const k = 100_000
	meanB := sb / float64(len(b))
	group := "sum((a-b)^2)*2-dot(a,b)/4+max(a)*mean(b)"
	for _, c := range []struct {
		name string
		src  func(k int) string
		want float64 // at k terms
	}{
		{"sum of one image", func(k int) string { return "sum(" + joined("a", "+", k) + ")" }, k * sa},
		{"sum of reductions", func(k int) string { return joined("dot(a,b)", "+", k) }, k * ab},
		{"product", func(k int) string { return "sum(a*b" + strings.Repeat("*1.00001", k) + ")" }, ab * math.Pow(1.00001, k)},
		{"mixed", func(k int) string { return joined(group, "+", k/5) }, k / 5 * (2*sq - ab/4 + maxA*meanB)},
		{"power tower", func(k int) string { return "sum(a*b)" + strings.Repeat("^1", k) }, ab},
		{"comparisons", func(k int) string { return "sum(a*b)" + strings.Repeat(" < 1e300", k-1) }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenth, tenthBytes := compileWork(t, c.src(k/10))
			var f *Formula
			whole, wholeBytes := compileWork(t, c.src(k), func(g *Formula) { f = g })
			if whole > 15*tenth || wholeBytes > 15*tenthBytes {
				t.Errorf("%d terms took %d allocations (%d bytes), %d terms %d (%d bytes): more than linear",
					k/10, tenth, tenthBytes, k, whole, wholeBytes)
			}
			t.Logf("%d terms: %d allocations, %d bytes; %d terms: %d, %d", k/10, tenth, tenthBytes, k, whole, wholeBytes)
			got := evalPair(t, f, a, b)
			if math.Abs(got-c.want) > 1e-9*math.Abs(c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		})
	}
}

// parseWork parses src and counts the heap allocations it made and the
// bytes they took.
func parseWork(src string) (allocs, bytes uint64, err error) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err = Parse(src, pairEnv)
	runtime.ReadMemStats(&m1)
	return m1.Mallocs - m0.Mallocs, m1.TotalAlloc - m0.TotalAlloc, err
}

// compileWork runs compileAll on src and counts the heap allocations it
// made and the bytes they took; keep, when given, receives the formula.
func compileWork(t *testing.T, src string, keep ...func(*Formula)) (allocs, bytes uint64) {
	t.Helper()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f := compileAll(t, src)
	runtime.ReadMemStats(&m1)
	for _, k := range keep {
		k(f)
	}
	return m1.Mallocs - m0.Mallocs, m1.TotalAlloc - m0.TotalAlloc
}

// TestFormulaDepth: nesting deeper than MaxDepth is refused with one
// line, at once (in work bounded by MaxDepth, not the formula's length), at the column where it goes too deep; MaxDepth itself
// is fine.
func TestFormulaDepth(t *testing.T) {
	const n = 100_000
	msg := fmt.Sprintf("nested too deeply: more than %d parentheses, function calls and signs inside one another", MaxDepth)
	for _, c := range []struct {
		name string
		src  func(n int) string
		col  int
	}{
		{"parentheses", func(n int) string { return "sum(" + strings.Repeat("(", n) + "a" + strings.Repeat(")", n) + ")" }, 4 + MaxDepth},
		{"signs", func(n int) string { return "sum(" + strings.Repeat("-(", n) + "a" + strings.Repeat(")", n) + ")" }, 0},
		{"signs without parentheses", func(n int) string { return "sum(" + strings.Repeat("- ", n) + "a)" }, 0},
		{"calls", func(n int) string { return strings.Repeat("exp(", n) + "sum(a)" + strings.Repeat(")", n) }, 0},
		{"unclosed", func(n int) string { return strings.Repeat("(", n) }, 1 + MaxDepth},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := c.src(n)
			allocs, bytes, err := parseWork(src)
			var fe *Error
			if !errors.As(err, &fe) || fe.Msg != msg || strings.Contains(err.Error(), "\n") || len(err.Error()) > 400 {
				t.Fatalf("error %v, want one line %q", err, msg)
			}
			if c.col > 0 && fe.Column != c.col {
				t.Errorf("column %d, want %d", fe.Column, c.col)
			}
			// Refused as it reaches the limit: past a copy of the source,
			// the work is that of MaxDepth levels whatever the formula's
			// length, so a tenth of the formula (still too deep) takes
			// about as many allocations, and the bytes grow no faster
			// than the length. Counted, not timed.
			tenth, tenthBytes, _ := parseWork(c.src(n / 10))
			if allocs > 2*tenth+100 || bytes > 2*uint64(len(src))+tenthBytes {
				t.Errorf("refusing %d bytes took %d allocations (%d bytes), a tenth of them %d (%d bytes): more work than one pass over the formula",
					len(src), allocs, bytes, tenth, tenthBytes)
			}
		})
	}
	ok := "sum(" + strings.Repeat("(", MaxDepth-1) + "a" + strings.Repeat(")", MaxDepth-1) + ")"
	f, err := Parse(ok, pairEnv)
	if err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
	if got := evalPair(t, f, []float64{1, 2}, []float64{0, 0}); got != 3 {
		t.Errorf("%d levels: %v, want 3", MaxDepth, got)
	}
	_, err = Parse(strings.Repeat("a", MaxLen+1), pairEnv)
	if want := fmt.Sprintf("the formula is %d bytes long; at most %d (1 MiB)", MaxLen+1, MaxLen); err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("a formula over the limit: %v, want %q", err, want)
	}
}

// TestFormulaErrorShortened: a long formula is quoted around the column
// of its error; a short one whole.
func TestFormulaErrorShortened(t *testing.T) {
	src := "sum(" + strings.Repeat("a+", 200) + "@+" + strings.Repeat("a+", 200) + "a)"
	_, err := Parse(src, pairEnv)
	want := `--formula "…` + strings.Repeat("a+", 30) + "@+" + strings.Repeat("a+", 29) + `…": column 405: illegal character U+0040 '@'`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}

	// At the end: the last 120 bytes.
	src = "sum(" + strings.Repeat("a+", 200) + "a"
	_, err = Parse(src, pairEnv)
	want = `--formula "…` + strings.Repeat("+a", 60) + `": column 406: a parenthesis is not closed: missing )`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}

	// No column: the beginning and the end.
	env := pairEnv
	env.Params = map[string]float64{"s": 1}
	src = joined("dot(a,b)", "+", 100)
	_, err = Parse(src, env)
	want = `--formula "` + src[:80] + "…" + src[len(src)-40:] + `": parameter s is not used`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}

	// Short: whole, as ever.
	_, err = Parse("sum(a+@)", pairEnv)
	if want := `--formula "sum(a+@)": column 7: illegal character U+0040 '@'`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func benchmarkFormulaCompile(b *testing.B, src string) {
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		compileAll(b, src)
	}
}

// BenchmarkFormulaCompile: the time per byte stays flat from 1,000 to
// 100,000 terms.
func BenchmarkFormulaCompile(b *testing.B) {
	for _, c := range []struct{ name, term, op, open, close string }{
		{"sum", "a", "+", "sum(", ")"},
		{"dots", "dot(a,b)", "+", "", ""},
		{"product", "1.00001", "*", "sum(a*b*", ")"},
	} {
		for _, k := range []int{1_000, 10_000, 100_000} {
			src := c.open + joined(c.term, c.op, k) + c.close
			b.Run(fmt.Sprintf("%s/%dk", c.name, k/1000), func(b *testing.B) { benchmarkFormulaCompile(b, src) })
		}
	}
}
