package workloadtest

import (
	"strings"
	"testing"
)

// RunValidate runs a table test of a Validate method, each case as a
// subtest named Name: def's value with Edit applied, checked by validate,
// must be refused with an error that mentions Want, or accepted where Want
// is "" (see WantError). The cases are of an unnamed struct type, so that
// the callers' tables stay unkeyed.
func RunValidate[T any](t *testing.T, def func() T, validate func(*T) error, cases []struct {
	Name string
	Edit func(*T)
	Want string // "": valid
}) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			v := def()
			c.Edit(&v)
			WantError(t, validate(&v), c.Want)
		})
	}
}

// WantError fails t unless err mentions want, or, where want is "", err
// is nil.
func WantError(t testing.TB, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("rejected: %v", err)
	case want != "" && err == nil:
		t.Errorf("accepted, want an error with %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("error %q does not mention %q", err, want)
	}
}
