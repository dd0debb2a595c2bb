package version

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var file string

// String is the release version, such as "0.1.0".
func String() string { return strings.TrimSpace(file) }
