package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/tapeloop/tapeloop/graphs/register"
	"github.com/tapeloop/tapeloop/internal/atomicfile"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

const catRegister = "REGISTRATION"

var registerDefaults = filejob.DefaultRegisterSpec()

// registerFlags are drr's flags for the volume and the views, then the
// registration's own.
var registerFlags = append(drrFlagsNamed("volume", "spacing", "origin", "frame", "shape", "order", "dtype", "series", "hu", "mu", "param", "mu-water", "size",
	"geometry", "orbit", "isocenter", "start", "axis", "sdd", "sid", "detector", "pixel", "step"),
	&cli.StringFlag{Name: "method", Category: catDRR, Value: registerDefaults.DRR.Method, Usage: "how the DRRs are rendered while registering: trilinear (smooth in the pose; the default) or siddon (exact path lengths)"},
	&cli.StringSliceFlag{Name: "target", TakesFile: true, Category: catRegister, Usage: "the X-ray images (line integrals) to register to: one `FILE` of every view's image, (P, R, C), or one per view in the geometry's order (repeat); .npy, .mha or .tiff as drr writes them"},
	&cli.StringFlag{Name: "init", TakesFile: true, Category: catRegister, Usage: "start from this transform.json `FILE` (a 4×4 rigid \"matrix\", or \"rotation\" and \"translation\"; default: the identity)"},
	&cli.StringFlag{Name: "out", TakesFile: true, Category: catRegister, Usage: "write transform.json, geometry.json (the views as seen from the volume as read) and trace.csv into `DIR`"},
	configFlag(&cli.StringFlag{Category: catRegister, Value: registerDefaults.Loss.String()}, registerDefaults.Config, "loss"),
	configFlag(&cli.IntFlag{Category: catRegister}, registerDefaults.Config, "patch"),
	configFlag(&cli.IntFlag{Category: catRegister}, registerDefaults.Config, "levels"),
	configFlag(&cli.IntFlag{Category: catRegister}, registerDefaults.Config, "max-steps"),
	configFlag(&cli.Float64Flag{Category: catRegister}, registerDefaults.Config, "tolerance"),
	configFlag(&cli.Float64Flag{Category: catRegister}, registerDefaults.Config, "accept"),
	reportFlag, quietFlag,
)

// drrFlagsNamed returns drr's flags of those names, in drr's order.
func drrFlagsNamed(names ...string) []cli.Flag {
	var out []cli.Flag
	for _, f := range drrFlags {
		if slices.Contains(names, f.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}

var registerCommand = &cli.Command{
	Name:  "register",
	Usage: "find the rigid pose of a CT from one or more X-ray views (2D/3D registration)",
	Description: `Moves the volume by a rigid transform (a rotation about the volume's centre
and a translation) until its DRRs match the targets: one image per view of
--geometry (or the orbit), given as line integrals as tapeloop drr writes them.
The loss (--loss ncc, gncc or mse, over whole images or --patch N patches) is
minimised by L-BFGS with its exact gradient, from Gorgonia's differentiation
of the graph pose → DRRs → loss, coarse to fine over --levels pyramid levels.
Each level's graph is compiled once and replayed at every step.

--out DIR receives transform.json (the transform, its rotation vector in
radians and translation in mm about "center", and its 4×4 matrix mapping a
world point of the volume as read to its registered place), geometry.json
(the views as seen from the volume as read: tapeloop drr --geometry renders
the targets' match with it) and trace.csv (step, level, loss, the six
parameters, seconds).

A run whose loss ends above --accept, or whose last level stops before it
converges, writes its outputs and exits with status 2: the start was likely
outside the capture range.`,
	Flags:  registerFlags,
	Action: runRegister,
}

func registerSpec(c *cli.Context) (filejob.RegisterSpec, error) {
	s := registerDefaults
	d, err := drrSpec(c)
	if err != nil {
		return s, err
	}
	// d.Method is register's own --method, which drrSpec read.
	s.DRR = d
	s.Targets = c.StringSlice("target")
	s.Init = c.String("init")
	s.Out = c.String("out")
	readConfig(c, &s.Config) // all but --loss, parsed here
	if s.Loss, err = ops.ParseLossKind(c.String("loss")); err != nil {
		return s, fmt.Errorf("--loss: %w", err)
	}
	return s, nil
}

// registerReport is --report's JSON.
type registerReport struct {
	Command     string            `json:"command"`
	Views       int               `json:"views"`
	Rows        int               `json:"rows"`
	Cols        int               `json:"cols"`
	Method      string            `json:"method"`
	Loss        string            `json:"loss"`
	Levels      []registerLevel   `json:"levels"`
	Steps       int               `json:"steps"`
	Evals       int               `json:"evaluations"`
	Seconds     float64           `json:"seconds"`
	BuildSecs   float64           `json:"build_seconds"`
	FinalLoss   float64           `json:"final_loss"`
	Converged   bool              `json:"converged"`
	Reason      string            `json:"reason,omitempty"`
	PeakRSS     int64             `json:"peak_rss_bytes"`
	Transform   json.RawMessage   `json:"transform"`
	Outputs     []string          `json:"outputs,omitempty"`
	Environment map[string]string `json:"environment"`
}

type registerLevel struct {
	Factor int `json:"factor"`
	Rows   int `json:"rows"`
	Cols   int `json:"cols"`
	Steps  int `json:"steps"`
}

func runRegister(c *cli.Context) error {
	spec, err := registerSpec(c)
	if err != nil {
		return err
	}
	report := c.String(reportFlag.Name)
	if err := filejob.CheckPaths(registerInputs(spec), []filejob.Path{{Flag: "out", Path: spec.Out, Dir: true}, {Flag: "report", Path: report}}); err != nil {
		return err
	}
	t0 := time.Now()
	r, info, err := filejob.OpenRegister(spec)
	if err != nil {
		return err
	}
	defer r.Close()
	build := time.Since(t0)
	quiet := c.Bool(quietFlag.Name)
	tty := term.IsTerminal(int(os.Stderr.Fd()))
	last := -1
	progress := func(s register.Step) {
		if quiet {
			return
		}
		l := r.Levels[s.Level]
		line := fmt.Sprintf("register: level %d/%d (%dx%d) step %d: loss %.6g, %.1fs", s.Level+1, len(r.Levels), l.Rows, l.Cols, s.N, s.Loss, s.Seconds)
		if tty {
			fmt.Fprintf(os.Stderr, "\r\033[K%s", line)
			return
		}
		if s.Level != last {
			last = s.Level
			fmt.Fprintln(os.Stderr, line)
		}
	}
	info, runErr := filejob.RunRegister(c.Context, spec, r, info, progress)
	if tty && !quiet {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if _, nc := runErr.(*filejob.NotConverged); runErr != nil && !nc {
		return runErr
	}
	res := info.Result
	tr := res.Transform
	fmt.Fprintf(stdout, "register: %d views of %dx%d, %s, %s: loss %.6g after %d steps (%d evaluations) in %.2fs; rotation %.4f° about (%.1f, %.1f, %.1f), translation (%.3f, %.3f, %.3f) mm\n",
		info.Views, info.Rows, info.Cols, info.Method, spec.Loss, res.Loss, len(res.Trace), res.Evals, time.Since(t0).Seconds(),
		180/math.Pi*norm3(tr.Rotation), tr.Center[0], tr.Center[1], tr.Center[2], tr.Translation[0], tr.Translation[1], tr.Translation[2])
	if report != "" {
		if err := writeRegisterReport(report, spec, r, info, build, time.Since(t0)); err != nil {
			return err
		}
	}
	return runErr
}

func registerInputs(s filejob.RegisterSpec) []filejob.Path {
	var ps []filejob.Path
	for _, t := range s.Targets {
		ps = append(ps, filejob.Path{Flag: "target", Path: t})
	}
	return append(ps, filejob.Path{Flag: "init", Path: s.Init}, filejob.Path{Flag: "volume", Path: s.DRR.Volume},
		filejob.Path{Flag: "geometry", Path: s.DRR.Geometry})
}

func norm3(v [3]float64) float64 { return math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]) }

func writeRegisterReport(path string, s filejob.RegisterSpec, r *register.Registration, info filejob.RegisterResult, build, total time.Duration) error {
	res := info.Result
	tj, err := filejob.TransformFile(res.Transform, info.Frame, nil, nil)
	if err != nil {
		return err
	}
	rep := registerReport{Command: "register", Views: info.Views, Rows: info.Rows, Cols: info.Cols, Method: info.Method, Loss: s.Loss.String(),
		Steps: len(res.Trace), Evals: res.Evals, Seconds: total.Seconds(), BuildSecs: build.Seconds(), FinalLoss: res.Loss,
		Converged: res.Converged, Reason: res.Reason, PeakRSS: sysmem.PeakRSS(), Transform: tj, Outputs: info.Files,
		Environment: map[string]string{"go": runtime.Version(), "goarch": runtime.GOARCH, "threads": fmt.Sprint(runtime.GOMAXPROCS(0))}}
	for i, l := range r.Levels {
		n := 0
		for _, st := range res.Trace {
			if st.Level == i {
				n++
			}
		}
		rep.Levels = append(rep.Levels, registerLevel{Factor: l.Factor, Rows: l.Rows, Cols: l.Cols, Steps: n})
	}
	b, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n')); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}
