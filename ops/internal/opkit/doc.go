// Package opkit holds the small pieces every tapeloop op is made of, shared
// by package ops and package ops/pairwise: the Op methods a CPU op answers
// alike (Owned), its hash, its output buffer, its stop flag, a count of
// non-finite values, and the description of a kernel launch that its CUDA
// twin and the CUDA emulator tests pass alike.
package opkit
