//go:build !tapeloop_cuda && !tapeloop_cudaemu

package pairwise

import "testing"

// backends are the places the conformance suites run: this build has no
// GPU, only the CPU.
func backends(*testing.T) []backend { return []backend{cpuBackend} }
