//go:build !tapeloop_cudaemu

package main

// buildTags are the tags TestMain builds the binary under test with.
const buildTags = ""
