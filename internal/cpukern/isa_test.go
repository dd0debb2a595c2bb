package cpukern

import (
	"runtime"
	"strings"
	"testing"
)

// levelNames are the instruction set levels this build has kernels for,
// by name: all three on x86-64, the baseline alone elsewhere (and on
// x86-64 built with -DTL_PORTABLE).
func levelNames() map[int]string {
	switch {
	case runtime.GOARCH == "amd64" && isaTop == isaAVX512:
		return map[int]string{isaBase: "sse2", isaAVX2: "avx2", isaAVX512: "avx512f"}
	case runtime.GOARCH == "arm64":
		return map[int]string{isaBase: "neon"}
	default:
		return map[int]string{isaBase: "generic"}
	}
}

// levelName names level isa, or says it is not built here.
func levelName(isa int) string {
	if n, ok := levelNames()[isa]; ok {
		return n
	}
	return map[int]string{isaAVX2: "avx2", isaAVX512: "avx512f"}[isa] + " (not built for " + runtime.GOARCH + ")"
}

// TestISALevels: the Go names of the instruction set levels are the C
// kernels' own: this build has the levels of its architecture (three on
// x86-64, the baseline alone on arm64 and elsewhere); limited to each
// level the CPU has, the kernels report that instruction set by name, and
// the packed matrix product is in use at isaAVX512 alone on x86-64, at
// every level on arm64 (NEON).
// A level below the lowest runs the baseline, and a level above the
// build's highest its highest.
func TestISALevels(t *testing.T) {
	if !(isaBase < isaAVX2 && isaAVX2 < isaAVX512) {
		t.Fatalf("levels out of order: base %d, avx2 %d, avx512 %d", isaBase, isaAVX2, isaAVX512)
	}
	names := levelNames()
	if _, ok := names[isaTop]; !ok || len(names) != isaTop+1 {
		t.Fatalf("%s: highest level %d, want the levels of %v", runtime.GOARCH, isaTop, names)
	}
	if runtime.GOARCH == "arm64" && isaTop != isaBase {
		t.Errorf("arm64: highest level %d, want the baseline %d", isaTop, isaBase)
	}
	top := limitISA(isaAVX512)
	defer limitISA(top)
	if top > isaTop {
		t.Fatalf("this CPU: level %d, above the build's highest, %d", top, isaTop)
	}
	if names[top] != PairDistISA() {
		t.Errorf("this CPU: level %d, kernels on %q", top, PairDistISA())
	}
	for isa := isaBase; isa <= top; isa++ {
		if before := limitISA(isa); before != top {
			t.Errorf("limitISA returned %d, want the level before, %d", before, top)
		}
		if got := PairDistISA(); got != names[isa] {
			t.Errorf("limited to level %d: kernels on %q, want %q", isa, got, names[isa])
		}
		if GEMM() != (isa == isaAVX512 || runtime.GOARCH == "arm64") { // arm64: NEON, whatever the level
			t.Errorf("limited to level %d (%s): GEMM() %v", isa, names[isa], GEMM())
		}
		limitISA(isaAVX512)
	}
	limitISA(isaBase - 1)
	if got := PairDistISA(); got != names[isaBase] {
		t.Errorf("limited below the lowest level: kernels on %q, want %s", got, names[isaBase])
	}
	limitISA(isaAVX512)
	if got := PairDistISA(); got != names[top] {
		t.Errorf("limited to the highest level: kernels on %q, want %s", got, names[top])
	}
}

// TestPaths: every kernel family is listed once, and its path is this
// CPU's: the kernels' instruction set, the packed product exactly when
// GEMM(), DRR's fan paths wherever the build has them (AVX-512 and AVX2;
// the portable build's trilinear fans, Siddon ray by ray), and no x86
// instruction set named outside x86-64.
func TestPaths(t *testing.T) {
	isa := PairDistISA()
	seen := map[string]bool{}
	for _, p := range Paths() {
		if seen[p.Family] || p.Family == "" || p.Path == "" {
			t.Errorf("family %q (path %q) listed twice or empty", p.Family, p.Path)
		}
		seen[p.Family] = true
		if isaTop != isaAVX512 && strings.Contains(p.Path, "avx") {
			t.Errorf("%s: %s: %q names an x86 instruction set", runtime.GOARCH, p.Family, p.Path)
		}
		switch p.Family {
		case "pairwise distances", "interpolation", "formulas", "wavelet spectra", "image filters":
			if p.Path != isa {
				t.Errorf("%s: path %q, want %q", p.Family, p.Path, isa)
			}
		case "drr":
			fans := strings.Contains(p.Path, "fans of rays")
			if !strings.HasPrefix(p.Path, isa+": ") || fans != (isa != "sse2") {
				t.Errorf("%s: path %q on %s, want fans of rays exactly off SSE2", p.Family, p.Path, isa)
			}
			if isaTop == isaBase && !strings.Contains(p.Path, "(trilinear, 4 rays per vector), Siddon ray by ray") {
				t.Errorf("%s: path %q, want the portable build's trilinear fans", p.Family, p.Path)
			}
		case "float32 dot products":
			if strings.HasPrefix(p.Path, "packed") != GEMM() {
				t.Errorf("%s: path %q with GEMM() %v", p.Family, p.Path, GEMM())
			}
		}
	}
	if len(seen) != 9 {
		t.Errorf("%d families, want 9", len(seen))
	}
}
