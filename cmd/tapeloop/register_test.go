package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/graphs/register"
	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/ops"
)

// registerFixture writes, in dir, views.json (two views of the phantom, at
// 0° and 90°) and tgt/drr.npy: the phantom moved by truth, rendered with
// Siddon's path (registration renders trilinear samples), and returns the
// phantom's flags.
func registerFixture(t *testing.T, dir string, truth rigid.Transform) []string {
	t.Helper()
	phantom := []string{"--size", "48"}
	all, err := ops.OrbitAbout(4, [3]float64{}, [3]float64{0, 0, 1}, 0, 1000, 700, 40, 44, 3.5)
	if err != nil {
		t.Fatal(err)
	}
	views := all[:2]
	for name, poses := range map[string][]ops.Pose{"views.json": views, "moved.json": register.SeenFrom(views, truth)} {
		b, err := drr.Geometry(poses, "lps")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"drr", "-q", "--geometry", filepath.Join(dir, "moved.json"), "--out", filepath.Join(dir, "tgt")}, phantom...)
	if _, se, code := run(t, args...); code != 0 {
		t.Fatalf("drr: exit %d: %s", code, se)
	}
	return phantom
}

func readTransform(t *testing.T, path string) (rigid.Transform, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Center, Rotation, Translation [3]float64
		Matrix                        [4][4]float64
	}
	var all map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	tr := rigid.Transform{Center: j.Center, Rotation: j.Rotation, Translation: j.Translation}
	m := tr.Matrix()
	for a := range 4 {
		for b := range 4 {
			if math.Abs(m[a][b]-j.Matrix[a][b]) > 1e-9 {
				t.Fatalf("%s: matrix %v, but its rotation and translation give %v", path, j.Matrix, m)
			}
		}
	}
	return tr, all
}

func TestRegisterRecoversAKnownTransform(t *testing.T) {
	dir := t.TempDir()
	truth := rigid.Transform{Rotation: [3]float64{0.06, -0.04, 0.09}, Translation: [3]float64{4, -3, 5}}
	phantom := registerFixture(t, dir, truth)
	out, rep := filepath.Join(dir, "reg"), filepath.Join(dir, "report.json")
	args := append([]string{"register", "-q", "--geometry", filepath.Join(dir, "views.json"), "--target", filepath.Join(dir, "tgt", "drr.npy"),
		"--levels", "2", "--out", out, "--report", rep}, phantom...)
	so, se, code := run(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, so, se)
	}
	got, all := readTransform(t, filepath.Join(out, "transform.json"))
	v := volume.Phantom(48, 192, 0.02)
	if e := register.MTRE(got, truth, v); e > 0.5 {
		t.Errorf("mTRE %.3f mm: found %+v, truth %+v", e, got, truth)
	}
	if all["converged"] != true || all["frame"] != "lps" {
		t.Errorf("transform.json: converged %v, frame %v", all["converged"], all["frame"])
	}
	// geometry.json: the views as seen from the volume as read, which
	// render the targets again.
	args = append([]string{"drr", "-q", "--geometry", filepath.Join(out, "geometry.json"), "--out", filepath.Join(dir, "again")}, phantom...)
	if _, se, code := run(t, args...); code != 0 {
		t.Fatalf("drr of geometry.json: exit %d: %s", code, se)
	}
	_, a, err := npy.ReadAll64(filepath.Join(dir, "again", "drr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := npy.ReadAll64(filepath.Join(dir, "tgt", "drr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"drr", "-q", "--geometry", filepath.Join(dir, "views.json"), "--out", filepath.Join(dir, "unmoved")}, phantom...)
	if _, se, code := run(t, args...); code != 0 {
		t.Fatalf("drr of views.json: exit %d: %s", code, se)
	}
	_, u, err := npy.ReadAll64(filepath.Join(dir, "unmoved", "drr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NCC with the targets: registered geometry %.5f, views %.5f; mTRE %.3f mm", ncc(a, b), ncc(u, b), register.MTRE(got, truth, v))
	if c := ncc(a, b); c < 0.99 || 1-c > (1-ncc(u, b))/20 {
		t.Errorf("DRRs of the registered geometry against the targets: NCC %.5f (the views unmoved: %.5f)", c, ncc(u, b))
	}
	f, err := os.Open(filepath.Join(out, "trace.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != "step,level,loss,rx,ry,rz,tx,ty,tz,seconds" || len(rows) < 5 {
		t.Fatalf("trace.csv: %d rows, header %v", len(rows), rows[0])
	}
	var r struct {
		Steps     int     `json:"steps"`
		FinalLoss float64 `json:"final_loss"`
		Converged bool    `json:"converged"`
	}
	rb, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rb, &r); err != nil {
		t.Fatal(err)
	}
	if r.Steps != len(rows)-1 || !r.Converged {
		t.Errorf("report: %d steps, trace %d; converged %v", r.Steps, len(rows)-1, r.Converged)
	}
	if !strings.HasPrefix(so, "register: 2 views of 40x44, trilinear, ncc: loss ") {
		t.Errorf("stdout: %q", so)
	}
}

func ncc(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}

// One target file per view, and a start given as a matrix.
func TestRegisterTargetPerViewAndInitMatrix(t *testing.T) {
	dir := t.TempDir()
	truth := rigid.Transform{Rotation: [3]float64{-0.05, 0.03, 0.02}, Translation: [3]float64{-2, 3, 1}}
	phantom := registerFixture(t, dir, truth)
	_, img, err := npy.ReadAll64(filepath.Join(dir, "tgt", "drr.npy"))
	if err != nil {
		t.Fatal(err)
	}
	n := 40 * 44
	writeNpy(t, filepath.Join(dir, "a.npy"), []int{40, 44}, img[:n])
	writeNpy(t, filepath.Join(dir, "b.npy"), []int{1, 40, 44}, img[n:])
	start := rigid.Transform{Rotation: [3]float64{0, 0, 0.05}, Translation: [3]float64{1, 0, 0}}
	m, _ := json.Marshal(map[string]any{"matrix": start.Matrix()})
	if err := os.WriteFile(filepath.Join(dir, "init.json"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "reg")
	args := append([]string{"register", "-q", "--geometry", filepath.Join(dir, "views.json"), "--target", filepath.Join(dir, "a.npy"), "--target", filepath.Join(dir, "b.npy"),
		"--init", filepath.Join(dir, "init.json"), "--levels", "2", "--out", out}, phantom...)
	if so, se, code := run(t, args...); code != 0 {
		t.Fatalf("exit %d: %s%s", code, so, se)
	}
	got, _ := readTransform(t, filepath.Join(out, "transform.json"))
	if e := register.MTRE(got, truth, volume.Phantom(48, 192, 0.02)); e > 0.5 {
		t.Errorf("mTRE %.3f mm", e)
	}
}

func TestRegisterBadInput(t *testing.T) {
	dir := t.TempDir()
	phantom := registerFixture(t, dir, rigid.Transform{Translation: [3]float64{2, 0, 0}})
	views, tgt := filepath.Join(dir, "views.json"), filepath.Join(dir, "tgt", "drr.npy")
	_, img, err := npy.ReadAll64(tgt)
	if err != nil {
		t.Fatal(err)
	}
	nan := append([]float64(nil), img...)
	nan[2*40*44-3] = math.NaN()
	writeNpy(t, filepath.Join(dir, "nan.npy"), []int{2, 40, 44}, nan)
	writeNpy(t, filepath.Join(dir, "small.npy"), []int{2, 40, 43}, img[:2*40*43])
	writeNpy(t, filepath.Join(dir, "three.npy"), []int{3, 40, 44}, append(img, img[:40*44]...))
	for name, s := range map[string]string{
		"scaled.json":   `{"matrix": [[1.1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]}`,
		"flip.json":     `{"matrix": [[-1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]}`,
		"row.json":      `{"matrix": [[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,1,1]]}`,
		"empty.json":    `{}`,
		"text.json":     `rotation 0`,
		"disagree.json": `{"matrix": [[1,0,0,5],[0,1,0,0],[0,0,1,0],[0,0,0,1]], "translation": [0,0,0], "rotation": [0,0,0]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", filepath.Join(dir, "nan.npy")}, "image 1, pixel (39, 41) is NaN: targets must be finite"},
		{[]string{"--target", filepath.Join(dir, "small.npy")}, "2 images of 40x43, the views want 2 of 40x44"},
		{[]string{"--target", filepath.Join(dir, "three.npy")}, "3 images of 40x44, the views want 2 of 40x44"},
		{[]string{"--target", tgt, "--target", tgt, "--target", tgt}, "3 files for 2 views"},
		{[]string{}, "--target: give the X-ray images"},
		{[]string{"--target", tgt, "--init", filepath.Join(dir, "scaled.json")}, "not a rigid transform: the matrix's 3×3 part is not a rotation"},
		{[]string{"--target", tgt, "--init", filepath.Join(dir, "flip.json")}, "a reflection"},
		{[]string{"--target", tgt, "--init", filepath.Join(dir, "row.json")}, "last row is not (0, 0, 0, 1)"},
		{[]string{"--target", tgt, "--init", filepath.Join(dir, "empty.json")}, `want "matrix" (4×4) or "rotation" and "translation"`},
		{[]string{"--target", tgt, "--init", filepath.Join(dir, "text.json")}, "not a JSON object"},
		{[]string{"--target", tgt, "--init", filepath.Join(dir, "disagree.json")}, "disagree"},
		{[]string{"--target", tgt, "--init", filepath.Join(dir, "missing.json")}, "--init"},
		{[]string{"--target", tgt, "--loss", "l1"}, "--loss"},
		{[]string{"--target", tgt, "--levels", "0"}, "--levels 0"},
		{[]string{"--target", tgt, "--patch", "-2"}, "--patch -2"},
		{[]string{"--target", tgt, "--levels", "6"}, "pyramid level of 1×1 pixels"},
	} {
		args := append(append([]string{"register", "-q", "--geometry", views, "--out", filepath.Join(dir, "out")}, c.args...), phantom...)
		so, se, code := run(t, args...)
		if code != 1 || strings.Count(se, "\n") != 1 || !strings.Contains(se, c.want) || so != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", c.args, code, so, se, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
			t.Fatalf("%v: left an output directory", c.args)
		}
	}
}

// A start far outside the capture range ends with exit status 2 and the
// transform written, marked not converged.
func TestRegisterFarStartIsNotConverged(t *testing.T) {
	dir := t.TempDir()
	phantom := registerFixture(t, dir, rigid.Transform{Translation: [3]float64{2, 0, 0}})
	if err := os.WriteFile(filepath.Join(dir, "far.json"), []byte(`{"rotation": [2.6, 0, 0], "translation": [0, 0, 0]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "reg")
	args := append([]string{"register", "-q", "--geometry", filepath.Join(dir, "views.json"), "--target", filepath.Join(dir, "tgt", "drr.npy"),
		"--init", filepath.Join(dir, "far.json"), "--levels", "2", "--out", out}, phantom...)
	so, se, code := run(t, args...)
	if code != 2 || !strings.Contains(se, "not converged") || strings.Count(se, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q, stdout %q; want exit 2, not converged", code, se, so)
	}
	_, all := readTransform(t, filepath.Join(out, "transform.json"))
	if all["converged"] != false {
		t.Errorf("transform.json says converged %v", all["converged"])
	}
	for _, f := range []string{"geometry.json", "trace.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

// Ctrl-C during a registration: one line, exit 1, nothing written.
func TestRegisterInterrupted(t *testing.T) {
	dir := t.TempDir()
	registerFixture(t, dir, rigid.Transform{Translation: [3]float64{2, 0, 0}})
	out := filepath.Join(dir, "reg")
	// A large phantom, so that the run is still going when the signal comes.
	args := []string{"register", "-q", "--geometry", filepath.Join(dir, "views.json"), "--target", filepath.Join(dir, "tgt", "drr.npy"),
		"--levels", "1", "--max-steps", "100000", "--tolerance", "0", "--size", "320", "--out", out}
	cmd := exec.Command(binary, args...)
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || se.String() != "tapeloop: stopped by SIGINT; nothing was written\n" {
		t.Fatalf("%v, stderr %q", err, se.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an interrupted registration left its output directory")
	}
}
