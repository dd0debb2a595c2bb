package ops

import (
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

func TestOrbitGeometry(t *testing.T) {
	c := [3]float64{1, -2, 3}
	poses, err := Orbit(4, c, 1000, 600, 3, 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Pose 1 is at 90°: source on +y, detector on −y, u = (−1, 0, 0).
	p := poses[1]
	want := [3]float64{1, 598, 3}
	for a := range 3 {
		if math.Abs(p.Source[a]-want[a]) > 1e-9 || math.Abs(p.Center[a]-[3]float64{1, -402, 3}[a]) > 1e-9 {
			t.Fatalf("pose 1: source %v centre %v", p.Source, p.Center)
		}
	}
	enc := make([]float64, PoseWidth)
	p.Encode(enc)
	// Pixel (0, 0) centre: centre − 2·du·û − 1·dv·v̂ with û = (−1, 0, 0),
	// v̂ = (0, 0, −1), pixel 2 mm.
	if got := [3]float64{enc[3], enc[4], enc[5]}; math.Abs(got[0]-5) > 1e-9 || math.Abs(got[1]+402) > 1e-9 || math.Abs(got[2]-5) > 1e-9 {
		t.Errorf("pixel (0, 0) at %v, want (5, -402, 5)", got)
	}
	if _, err := Orbit(0, c, 1000, 500, 1, 1, 1); err == nil {
		t.Error("P = 0 accepted")
	}
	if _, err := Orbit(3, c, 500, 600, 1, 1, 1); err == nil {
		t.Error("sid > sdd accepted")
	}
}

func TestReadGeometryRejects(t *testing.T) {
	good := `{"source": [0,0,500], "center": [0,0,-500], "u": [1,0,0], "v": [0,1,0], "rows": 4, "cols": 5, "pixel": [1,1]}`
	cases := map[string]string{
		"no poses":     `{"poses": []}`,
		"zero u":       `{"poses": [` + strings.Replace(good, `"u": [1,0,0]`, `"u": [0,0,0]`, 1) + `]}`,
		"parallel":     `{"poses": [` + strings.Replace(good, `"v": [0,1,0]`, `"v": [2,0,0]`, 1) + `]}`,
		"rows 0":       `{"poses": [` + strings.Replace(good, `"rows": 4`, `"rows": 0`, 1) + `]}`,
		"pixel":        `{"poses": [` + strings.Replace(good, `"pixel": [1,1]`, `"pixel": [0,1]`, 1) + `]}`,
		"two sizes":    `{"poses": [` + good + `,` + strings.Replace(good, `"cols": 5`, `"cols": 6`, 1) + `]}`,
		"unknown key":  `{"poses": [` + good + `], "extra": 1}`,
		"not json":     `{"poses": [`,
		"wrong type":   `{"poses": [{"source": "here"}]}`,
		"short vector": `{"poses": [` + strings.Replace(good, `"u": [1,0,0]`, `"u": [1,0]`, 1) + `]}`,
	}
	for name, doc := range cases {
		if _, err := readGeometry(strings.NewReader(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Keys given twice or in another case, which encoding/json would take
	// (the last of two, any case): refused, naming the key.
	for name, c := range map[string]struct{ doc, want string }{
		"source twice":    {`{"poses": [` + strings.Replace(good, `"source": [0,0,500]`, `"source": [0,0,500], "source": [0,0,0]`, 1) + `]}`, `"source" given twice`},
		"poses twice":     {`{"poses": [], "poses": [` + good + `]}`, `"poses" given twice`},
		"frame twice":     {`{"frame": "lps", "poses": [` + good + `], "frame": "ras"}`, `"frame" given twice`},
		"Source":          {`{"poses": [` + strings.Replace(good, `"source"`, `"Source"`, 1) + `]}`, `"Source": write it "source"`},
		"POSES":           {`{"POSES": [` + good + `]}`, `"POSES": write it "poses"`},
		"source, Source":  {`{"poses": [` + strings.Replace(good, `"source": [0,0,500]`, `"source": [0,0,500], "Source": [0,0,0]`, 1) + `]}`, `"Source": write it "source"`},
		"frame a number":  {`{"frame": 5, "poses": [` + good + `]}`, "want a string"},
		"pose a number":   {`{"poses": [5]}`, "poses holds a JSON number, want pose objects"},
		"source 1e400":    {`{"poses": [` + strings.Replace(good, `[0,0,500]`, `[0,0,1e400]`, 1) + `]}`, "poses.source: 1e400 is beyond the range"},
		"second pose dup": {`{"poses": [` + good + `,` + strings.Replace(good, `"rows": 4`, `"rows": 4, "rows": 4`, 1) + `]}`, `"rows" given twice`},
	} {
		_, err := readGeometry(strings.NewReader(c.doc))
		if err == nil || !errors.Is(err, ErrGeometry) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	// The same key in two objects is no repeat; nor are keys inside the
	// projection matrices of a DRR run's own geometry.json.
	two := `{"frame": "lps", "projection": "x", "poses": [` + good + `,` + strings.Replace(good, `"rows": 4`, `"rows": 4, "matrix": [[1,2,3,4],[5,6,7,8],[9,10,11,12]]`, 1) + `]}`
	if p, err := readGeometry(strings.NewReader(two)); err != nil || len(p) != 2 {
		t.Errorf("two poses: %v", err)
	}
	if p, err := readGeometry(strings.NewReader(`{"poses": [` + good + `]}`)); err != nil || len(p) != 1 {
		t.Errorf("good geometry: %v", err)
	}
}

func FuzzReadGeometry(f *testing.F) {
	f.Add(`{"poses": [{"source": [0,0,500], "center": [0,0,-500], "u": [1,0,0], "v": [0,1,0], "rows": 4, "cols": 5, "pixel": [1,1]}]}`)
	f.Add(`{"poses": []}`)
	f.Fuzz(func(t *testing.T, doc string) {
		poses, err := readGeometry(strings.NewReader(doc))
		if err != nil {
			return
		}
		enc := make([]float64, PoseWidth)
		for i, p := range poses {
			if p.Validate(i) != nil {
				t.Fatalf("pose %d accepted but invalid", i)
			}
			p.Encode(enc)
			for _, x := range enc {
				if math.IsNaN(x) {
					t.Fatalf("pose %d encodes to NaN: %+v", i, p)
				}
			}
		}
	})
}

// CheckOrbit rejects what Orbit rejects, with the same error.
func TestCheckOrbitAgreesWithOrbit(t *testing.T) {
	c := [3]float64{10, -20, 30}
	for _, a := range []struct {
		n          int
		sdd, sid   float64
		rows, cols int
		pixel      float64
	}{
		{4, 1000, 600, 3, 5, 2},
		{0, 1000, 600, 3, 5, 2},
		{4, 500, 600, 3, 5, 2},
		{4, 1000, 0, 3, 5, 2},
		{4, math.NaN(), 600, 3, 5, 2},
		{4, math.Inf(1), 600, 3, 5, 2},
		{4, 1000, 600, 0, 5, 2},
		{4, 1000, 600, 3, 5, 0},
		{4, 1000, 600, 3, 5, math.NaN()},
	} {
		_, oerr := Orbit(a.n, c, a.sdd, a.sid, a.rows, a.cols, a.pixel)
		cerr := CheckOrbit(a.n, a.sdd, a.sid, a.rows, a.cols, a.pixel)
		if (oerr == nil) != (cerr == nil) || (oerr != nil && oerr.Error() != cerr.Error()) {
			t.Errorf("%+v: Orbit says %v, CheckOrbit %v", a, oerr, cerr)
		}
	}
}

// readGeometry is ReadGeometryFrame without the frame.
func readGeometry(r io.Reader) ([]Pose, error) {
	poses, _, err := ReadGeometryFrame(r)
	return poses, err
}
