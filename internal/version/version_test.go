package version

import (
	"regexp"
	"testing"
)

// TestVersionIsOneRelease: the file holds one version of the form the
// wheel's metadata accepts (digits and dots), nothing around it.
func TestVersionIsOneRelease(t *testing.T) {
	if v := String(); !regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`).MatchString(v) {
		t.Fatalf("VERSION holds %q, want a release such as 0.1.0", v)
	}
}
