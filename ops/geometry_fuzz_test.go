package ops

import (
	"math"
	"runtime"
	"strings"
	"testing"
)

// FuzzGeometry reads a geometry file: no panic, an error of one line,
// allocation proportional to the document, and poses that encode to
// finite rays, however many pixels or whatever coordinates it claims.
func FuzzGeometry(f *testing.F) {
	pose := `{"source": [0,0,500], "center": [0,0,-500], "u": [1,0,0], "v": [0,1,0], "rows": 4, "cols": 5, "pixel": [1,1]}`
	f.Add(`{"poses": [` + pose + `]}`)
	f.Add(`{"poses": [` + pose + `, ` + pose + `]} trailing`)
	f.Add(`{"poses": [` + strings.NewReplacer(`"rows": 4`, `"rows": 2147483648`, `"cols": 5`, `"cols": 2147483648`).Replace(pose) + `]}`)
	f.Add(`{"poses": [` + strings.Replace(pose, `[0,0,500]`, `[0,0,1e300]`, 1) + `]}`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, doc string) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		poses, err := readGeometry(strings.NewReader(doc))
		runtime.ReadMemStats(&m1)
		if a := m1.TotalAlloc - m0.TotalAlloc; a > 64*uint64(len(doc))+1<<20 {
			t.Fatalf("allocated %d bytes for a %d-byte document", a, len(doc))
		}
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			if err.Error() == "geometry: EOF" {
				t.Fatalf("bare EOF for %q", doc)
			}
			return
		}
		enc := make([]float64, PoseWidth)
		for i, p := range poses {
			p.Encode(enc)
			for _, x := range enc {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("pose %d encodes to %v: %+v", i, enc, p)
				}
			}
			if l := LongestRay(enc, p.Rows, p.Cols); math.IsNaN(l) || math.IsInf(l, 0) || l <= 0 {
				t.Fatalf("pose %d: longest ray %g: %+v", i, l, p)
			}
		}
	})
}
