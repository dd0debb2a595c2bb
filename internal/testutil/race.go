//go:build race

package testutil

// Race is true in a test binary built with the race detector (go test
// -race), where compiling and evaluating run several times slower: a test
// checking a time bound, or repeating what the plain run already checks
// without any goroutine of its own, skips itself there.
const Race = true
