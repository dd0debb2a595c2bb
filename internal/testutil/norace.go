//go:build !race

package testutil

// Race is true in a test binary built with the race detector (go test
// -race); see race.go.
const Race = false
