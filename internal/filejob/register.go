package filejob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/tapeloop/tapeloop/graphs/drr"
	"github.com/tapeloop/tapeloop/graphs/register"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/stackfile"
	"github.com/tapeloop/tapeloop/ops"
)

// RegisterSpec is a registration as the command line states it: the
// volume and the views as a DRR reads them (DRR: its volume, placement,
// units, geometry or orbit, method and step; its outputs unused), the
// targets, the start and the optimiser's settings.
type RegisterSpec struct {
	DRR DRRSpec
	// Targets is one file holding every view's image, (P, R, C), or one
	// file per view in the geometry's order: .npy, .mha or .tiff, as drr
	// writes them.
	Targets []string
	// Init is a transform.json to start from; "": the identity.
	Init string
	register.Config
	// Out is the directory for transform.json, geometry.json and
	// trace.csv; "": nothing written.
	Out string
}

// DefaultRegisterSpec registers the views' targets by NCC, coarse to fine,
// with trilinear samples 1 mm apart.
func DefaultRegisterSpec() RegisterSpec {
	s := RegisterSpec{DRR: DefaultDRRSpec(), Config: register.DefaultConfig()}
	s.DRR.Method = "trilinear"
	return s
}

// TransformJSON is transform.json: the transform that moves the volume as
// read (world mm, in Frame) to its registered place, T(x) = R(x − center)
// + center + translation, R the rotation by the rotation vector
// (radians); Matrix is the same as a 4×4 homogeneous matrix, rows first.
type TransformJSON struct {
	Frame       string        `json:"frame"`
	Center      [3]float64    `json:"center"`
	Rotation    [3]float64    `json:"rotation"`
	Translation [3]float64    `json:"translation"`
	Matrix      [4][4]float64 `json:"matrix"`
	Loss        *float64      `json:"loss,omitempty"`
	Converged   *bool         `json:"converged,omitempty"`
}

// RegisterResult is what a registration found and how.
type RegisterResult struct {
	register.Result
	Frame      string
	Views      int
	Rows, Cols int
	Method     string
	Files      []string // written into Out
	poses      []ops.Pose
}

// NotConverged is the error of a registration that ran to its end without
// converging: the transform was written, and the command exits with
// status 2.
type NotConverged struct{ Reason string }

func (e *NotConverged) Error() string { return "register: not converged: " + e.Reason }

// ExitCode is 2.
func (e *NotConverged) ExitCode() int { return 2 }

// Validate checks the spec without reading a file.
func (s RegisterSpec) Validate() error {
	if _, err := s.DRR.parse(); err != nil {
		return err
	}
	if len(s.Targets) == 0 {
		return errors.New("--target: give the X-ray images to register to (one file of every view, or one per view)")
	}
	return s.Config.Validate()
}

// OpenRegister reads the volume, the views, the targets and the start, and
// compiles the registration.
func OpenRegister(s RegisterSpec) (*register.Registration, RegisterResult, error) {
	var info RegisterResult
	if err := s.Validate(); err != nil {
		return nil, info, err
	}
	p, _ := s.DRR.parse()
	v, err := s.DRR.loadVolume(p)
	if err != nil {
		return nil, info, err
	}
	poses, err := s.DRR.poses(p, v)
	if err != nil {
		return nil, info, err
	}
	rows, cols := poses[0].Rows, poses[0].Cols
	for i, q := range poses {
		if q.Rows != rows || q.Cols != cols {
			return nil, info, fmt.Errorf("--geometry: pose %d has %dx%d pixels, pose 0 %dx%d: registration takes views of one size", i, q.Rows, q.Cols, rows, cols)
		}
	}
	setup, err := s.DRR.Prepare(v, rows, cols) // --mu, in place
	if err != nil {
		return nil, info, err
	}
	if setup.Post != nil || setup.Filter != nil {
		return nil, info, errors.New("--post and --filter: registration compares line integrals with the targets; give targets of line integrals (−log of normalised intensity)")
	}
	targets, err := readTargets(s.Targets, len(poses), rows, cols)
	if err != nil {
		return nil, info, err
	}
	prob := &register.Problem{Vol: v, Views: register.Encode(poses), Rows: rows, Cols: cols, Targets: targets, Center: v.Centre()}
	if s.Init != "" {
		if prob.Init, err = readInit(s.Init, string(p.frame), v.Centre()); err != nil {
			return nil, info, err
		}
		prob.Center = prob.Init.Center
	}
	cfg := s.Config
	cfg.Step = setup.Step // 0 for Siddon
	r, err := register.New(prob, cfg)
	if err != nil {
		return nil, info, fmt.Errorf("register: %w", err)
	}
	info = RegisterResult{Frame: string(p.frame), Views: len(poses), Rows: rows, Cols: cols, Method: s.DRR.Method, poses: poses}
	return r, info, nil
}

// readTargets reads one file of (views, rows, cols) images or one file
// per view.
func readTargets(paths []string, views, rows, cols int) ([]float64, error) {
	if len(paths) != 1 && len(paths) != views {
		return nil, fmt.Errorf("--target: %d files for %d views: give one file holding every view's image, or one file per view", len(paths), views)
	}
	var all []float64
	for _, path := range paths {
		im, err := stackfile.Read(path)
		if err != nil {
			return nil, fmt.Errorf("--target: %w", err)
		}
		want := 1
		if len(paths) == 1 {
			want = views
		}
		if im.N != want || im.Rows != rows || im.Cols != cols {
			return nil, fmt.Errorf("--target %s: %d images of %dx%d, the views want %d of %dx%d", path, im.N, im.Rows, im.Cols, want, rows, cols)
		}
		for i, x := range im.Pix {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				k := i / (rows * cols)
				r := i % (rows * cols)
				return nil, fmt.Errorf("--target %s: image %d, pixel (%d, %d) is %g: targets must be finite", path, k, r/cols, r%cols, x)
			}
		}
		all = append(all, im.Pix...)
	}
	return all, nil
}

// readInit reads a transform.json (ParseTransform).
func readInit(path, frame string, centre [3]float64) (rigid.Transform, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return rigid.Transform{}, fmt.Errorf("--init: %w", err)
	}
	t, err := ParseTransform(b, frame, centre)
	if err != nil {
		return rigid.Transform{}, fmt.Errorf("--init %s: %w", path, err)
	}
	return t, nil
}

// ParseTransform reads a transform as transform.json writes it: a matrix
// (a rotation and a translation, checked), or a rotation vector and a
// translation, about its "center" (centre when absent). A "frame" must be
// frame.
func ParseTransform(b []byte, frame string, centre [3]float64) (rigid.Transform, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return rigid.Transform{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var t TransformJSON
	if err := json.Unmarshal(b, &t); err != nil {
		return rigid.Transform{}, err
	}
	if _, ok := raw["frame"]; ok && t.Frame != frame {
		return rigid.Transform{}, fmt.Errorf("the transform is in the %s frame, --frame is %s", t.Frame, frame)
	}
	if _, ok := raw["center"]; !ok {
		t.Center = centre
	}
	for _, x := range append(append(t.Center[:], t.Rotation[:]...), t.Translation[:]...) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return rigid.Transform{}, errors.New("a value is not finite")
		}
	}
	_, hasM := raw["matrix"]
	_, hasR := raw["rotation"]
	_, hasT := raw["translation"]
	switch {
	case hasM:
		tr, err := rigid.FromMatrix(t.Matrix, t.Center)
		if err != nil {
			return rigid.Transform{}, fmt.Errorf("not a rigid transform: %w", err)
		}
		if hasR || hasT {
			alt := rigid.Transform{Center: t.Center, Rotation: t.Rotation, Translation: t.Translation}
			if e := maxDiff(alt.Matrix(), t.Matrix); e > 1e-6 {
				return rigid.Transform{}, fmt.Errorf("its matrix and its rotation and translation disagree (by %.3g)", e)
			}
		}
		return tr, nil
	case hasR || hasT:
		return rigid.Transform{Center: t.Center, Rotation: t.Rotation, Translation: t.Translation}, nil
	}
	return rigid.Transform{}, errors.New(`want "matrix" (4×4) or "rotation" and "translation"`)
}

func maxDiff(a, b [4][4]float64) float64 {
	m := 0.0
	for i := range 4 {
		for j := range 4 {
			m = math.Max(m, math.Abs(a[i][j]-b[i][j]))
		}
	}
	return m
}

// TransformFile returns transform.json's text for t: a field a line, each
// array on its line.
func TransformFile(t rigid.Transform, frame string, loss *float64, converged *bool) ([]byte, error) {
	j := TransformJSON{Frame: frame, Center: t.Center, Rotation: t.Rotation, Translation: t.Translation, Matrix: t.Matrix(), Loss: loss, Converged: converged}
	var buf bytes.Buffer
	buf.WriteString("{\n")
	fields := []struct {
		name string
		v    any
	}{{"frame", j.Frame}, {"center", j.Center}, {"rotation", j.Rotation}, {"translation", j.Translation}, {"matrix", j.Matrix}}
	if loss != nil {
		fields = append(fields, struct {
			name string
			v    any
		}{"loss", *loss})
	}
	if converged != nil {
		fields = append(fields, struct {
			name string
			v    any
		}{"converged", *converged})
	}
	for i, f := range fields {
		b, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, " %q: %s", f.name, b)
		if i < len(fields)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// RunRegister registers and, with s.Out, writes transform.json, the views
// as seen from the volume as read (geometry.json, for tapeloop drr
// --geometry: rendering the volume with them gives the targets) and
// trace.csv. A run that did not converge writes them too and returns
// *NotConverged.
func RunRegister(ctx context.Context, s RegisterSpec, r *register.Registration, info RegisterResult, progress func(register.Step)) (RegisterResult, error) {
	res, err := r.Run(ctx, progress)
	info.Result = res
	if err != nil {
		if ctx.Err() != nil {
			// Stopped by a signal: its handler says so, and nothing is
			// written.
			return info, fmt.Errorf("register: %w", atomicfile.ErrStopped)
		}
		return info, err
	}
	if s.Out != "" {
		if info.Files, err = writeRegistration(s.Out, info); err != nil {
			return info, err
		}
	}
	if !res.Converged {
		return info, &NotConverged{Reason: res.Reason}
	}
	return info, nil
}

func writeRegistration(dir string, info RegisterResult) ([]string, error) {
	made, err := atomicfile.MakeDirs(dir)
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			atomicfile.RemoveDirs(made)
		}
	}()
	res := info.Result
	loss, conv := res.Loss, res.Converged
	tj, err := TransformFile(res.Transform, info.Frame, &loss, &conv)
	if err != nil {
		return nil, err
	}
	gj, err := drr.Geometry(register.SeenFrom(info.poses, res.Transform), info.Frame)
	if err != nil {
		return nil, err
	}
	var tr strings.Builder
	tr.WriteString("step,level,loss,rx,ry,rz,tx,ty,tz,seconds\n")
	for _, st := range res.Trace {
		fmt.Fprintf(&tr, "%d,%d,%.10g", st.N, st.Level, st.Loss)
		for _, x := range st.Params {
			fmt.Fprintf(&tr, ",%.10g", x)
		}
		fmt.Fprintf(&tr, ",%.4f\n", st.Seconds)
	}
	files := []struct {
		name string
		b    []byte
	}{{"transform.json", tj}, {"geometry.json", gj}, {"trace.csv", []byte(tr.String())}}
	var names []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := atomicfile.WriteFile(p, f.b); err != nil {
			return nil, err
		}
		names = append(names, p)
	}
	atomicfile.KeepDirs(made)
	ok = true
	return names, nil
}
