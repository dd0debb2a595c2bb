package shard

import (
	"os"
	"testing"
)

// unset removes k from the environment for the rest of the test (t.Setenv
// restores the earlier value afterwards).
func unset(t *testing.T, k string) {
	t.Helper()
	if err := os.Unsetenv(k); err != nil {
		t.Fatal(err)
	}
}
