package cpukern

import (
	"runtime"
	"testing"
)

// TestISALevels: the Go names of the instruction set levels are the C
// kernels' own: limited to each level the CPU has, the kernels report that
// instruction set by name, and the packed matrix product (AVX-512) is in
// use at isaAVX512 alone on x86-64, at every level on arm64 (NEON). A
// level below the lowest runs SSE2.
func TestISALevels(t *testing.T) {
	if !(isaSSE2 < isaAVX2 && isaAVX2 < isaAVX512) {
		t.Fatalf("levels out of order: sse2 %d, avx2 %d, avx512 %d", isaSSE2, isaAVX2, isaAVX512)
	}
	top := limitISA(isaAVX512)
	defer limitISA(top)
	names := map[int]string{isaSSE2: "sse2", isaAVX2: "avx2", isaAVX512: "avx512f"}
	if names[top] != PairDistISA() {
		t.Errorf("this CPU: level %d, kernels on %q", top, PairDistISA())
	}
	for isa := isaSSE2; isa <= top; isa++ {
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
	limitISA(isaSSE2 - 1)
	if got := PairDistISA(); got != "sse2" {
		t.Errorf("limited below the lowest level: kernels on %q, want sse2", got)
	}
}
