package cuda

import "strings"

// entries lists the kernels a PTX module defines (".visible .entry name(").
func entries(src string) []string {
	var names []string
	for _, line := range strings.Split(src, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), ".visible .entry "); ok {
			if i := strings.IndexByte(rest, '('); i > 0 {
				names = append(names, rest[:i])
			}
		}
	}
	return names
}
