//go:build tapeloop_cudaemu

package main

// buildTags are the tags TestMain builds the binary under test with: the
// CUDA emulator, so the CLI tests can run --device cuda without a GPU.
const buildTags = "tapeloop_cudaemu"
