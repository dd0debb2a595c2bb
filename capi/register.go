package main

/*
#include <stdint.h>
*/
import "C"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tapeloop/tapeloop/graphs/drr"
	reg "github.com/tapeloop/tapeloop/graphs/register"
	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/filejob"
	"github.com/tapeloop/tapeloop/internal/rigid"
	"github.com/tapeloop/tapeloop/internal/telemetry"
	"github.com/tapeloop/tapeloop/ops"
)

// registerConfig is the JSON config of tl_register_create: the CLI's
// register settings, and the centre the transform turns about.
type registerConfig struct {
	// Loss is "ncc" (the default), "gncc" or "mse"; Patch its patch size
	// in pixels (0: whole images).
	Loss  string `json:"loss" flag:"loss"`
	Patch int    `json:"patch" flag:"patch"`
	// Levels is the pyramid's levels (absent: 1, a single level at full
	// size), MaxSteps, Tolerance and Accept the optimiser's settings
	// (absent: reg.DefaultConfig's).
	Levels    *int     `json:"levels" flag:"levels"`
	MaxSteps  *int     `json:"max_steps" flag:"max-steps"`
	Tolerance *float64 `json:"tolerance" flag:"tolerance"`
	Accept    *float64 `json:"accept" flag:"accept"`
	// Center is the point the rotation turns about, world mm (absent: the
	// volume's centre).
	Center *[3]float64 `json:"center"`
}

func init() { configs["register"] = registerConfig{} }

// regProgram is a registration of a DRR's volume to targets, compiled
// once: its finest level's Eval gives the loss and its gradient, its Run
// registers. Interrupt stops the call in progress (one made between
// calls stops the next) at its next check: between the rendering's
// blocks of rows, or between the optimiser's evaluations.
type regProgram struct {
	r      *reg.Registration
	stop   atomic.Bool
	mu     sync.Mutex
	cancel context.CancelFunc // the call in progress's
	calls  int
	last   float64
	secs   []telemetry.Iteration // the calls' times, the latest maxRegCalls
	items  int
}

// maxRegCalls is the most calls whose times Report summarises.
const maxRegCalls = 1 << 16

func (p *regProgram) finest() *reg.Level { return p.r.Levels[len(p.r.Levels)-1] }

// begin starts a call: its context, cancelled by Interrupt.
func (p *regProgram) begin() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.cancel = cancel
	p.mu.Unlock()
	if p.stop.Load() {
		cancel()
	}
	return ctx
}

// end ends the call begun at t0 and turns its error into one wrapping
// engine.ErrInterrupted when Interrupt stopped it.
func (p *regProgram) end(t0 time.Time, items int, err error) error {
	p.mu.Lock()
	p.cancel()
	p.cancel = nil
	p.mu.Unlock()
	stopped := p.stop.Swap(false)
	if err != nil {
		if stopped || errors.Is(err, context.Canceled) || errors.Is(err, ops.ErrStopped) {
			return fmt.Errorf("register: %w during the call", engine.ErrInterrupted)
		}
		return err
	}
	p.last = time.Since(t0).Seconds()
	if len(p.secs) == maxRegCalls {
		p.secs = append(p.secs[:0], p.secs[maxRegCalls/2:]...)
	}
	p.secs = append(p.secs, telemetry.Iteration{Seconds: p.last})
	p.calls++
	p.items = items
	return nil
}

func (p *regProgram) Close() error {
	p.r.Close()
	return nil
}

func (p *regProgram) Interrupt() {
	p.stop.Store(true)
	p.mu.Lock()
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
}

// DOT is the finest level's graph: parameters → images → loss and its
// gradient.
func (p *regProgram) DOT() (string, error) {
	var b bytes.Buffer
	if err := engine.WriteDOT(&b, "register", p.finest().Graph()); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (p *regProgram) Report() engine.Report {
	return engine.Report{Workload: "register", Calls: p.calls, LastItems: p.items, LastSeconds: p.last,
		Summary: telemetry.Summarize(p.secs), Threads: engine.Threads().Threads, ThreadsReason: engine.Threads().Reason}
}

// tl_register_transform reads the transform text (JSON: transform.json's
// "rotation", "translation" and "center", or its 4×4 "matrix") for the
// DRR h's volume: params receives its six parameters (rotation vector in
// radians, translation in mm), center its centre (the volume's when the
// text has none).
//
//export tl_register_transform
func tl_register_transform(h C.int64_t, text *C.char, params, center *C.double) *C.char {
	return guard(func() error {
		return call(h, "a DRR", 0, func(p *drr.Program) error {
			if text == nil || params == nil || center == nil {
				return errors.New("transform: NULL argument")
			}
			t, err := filejob.ParseTransform([]byte(C.GoString(text)), "", p.Volume().Centre())
			if err != nil {
				return fmt.Errorf("transform: %w", err)
			}
			q := t.Params()
			copy(unsafe.Slice((*float64)(unsafe.Pointer(params)), 6), q[:])
			copy(unsafe.Slice((*float64)(unsafe.Pointer(center)), 3), t.Center[:])
			return nil
		})
	})
}

// tl_register_create compiles the registration of the DRR h's volume (as
// it renders it: its method and step) to targets (n·rows·cols doubles,
// the images of the n poses, 14 doubles each), by config (JSON,
// registerConfig); *handle receives the object. Both arrays are copied.
//
//export tl_register_create
func tl_register_create(h C.int64_t, config *C.char, poses *C.double, length C.int64_t, targets *C.double, tlen C.int64_t, handle *C.int64_t) *C.char {
	return guard(func() error {
		if handle == nil {
			return errors.New("config: NULL handle")
		}
		var c registerConfig
		if err := decode(config, &c); err != nil {
			return err
		}
		cfg := reg.DefaultConfig()
		cfg.Levels, cfg.Patch = 1, c.Patch
		if c.Levels != nil {
			cfg.Levels = *c.Levels
		}
		if c.MaxSteps != nil {
			cfg.MaxSteps = *c.MaxSteps
		}
		if c.Tolerance != nil {
			cfg.Tolerance = *c.Tolerance
		}
		if c.Accept != nil {
			cfg.Accept = *c.Accept
		}
		if c.Loss != "" {
			k, err := ops.ParseLossKind(c.Loss)
			if err != nil {
				return fmt.Errorf("--loss: %w", err)
			}
			cfg.Loss = k
		}
		if poses == nil || targets == nil || length < 0 || tlen < 0 {
			return errors.New("register: NULL or negative arrays")
		}
		var r *reg.Registration
		err := call(h, "a DRR", 0, func(p *drr.Program) error {
			if !p.LineIntegrals() {
				return errors.New("register: the DRR has --post or --filter: registration compares line integrals with the targets; make a DRR without them and give targets of line integrals (−log of normalised intensity)")
			}
			q, err := p.Poses(unsafe.Slice((*float64)(unsafe.Pointer(poses)), int(length)))
			if err != nil {
				return err
			}
			tg := append([]float64(nil), unsafe.Slice((*float64)(unsafe.Pointer(targets)), int(tlen))...)
			v := p.Volume()
			prob := &reg.Problem{Vol: v, Views: reg.Encode(q), Rows: p.Rows, Cols: p.Cols, Targets: tg, Center: v.Centre()}
			if c.Center != nil {
				prob.Center = *c.Center
			}
			for _, x := range prob.Center {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return errors.New("center=: a value is not finite")
				}
			}
			cfg.Step = p.Step()
			r, err = reg.New(prob, cfg)
			if err != nil {
				return fmt.Errorf("register: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		rp := &regProgram{r: r}
		for _, l := range r.Levels {
			l.Render.SetStop(&rp.stop)
		}
		*handle = C.int64_t(register(rp))
		return nil
	})
}

// tl_register_eval writes the loss at params (six doubles: rotation
// vector in radians, translation in mm, about the compiled centre) into
// *loss and its gradient with respect to them into grad (six doubles):
// one replay of the finest level's graph.
//
//export tl_register_eval
func tl_register_eval(h C.int64_t, params *C.double, loss *C.double, grad *C.double, interruptible C.int) *C.char {
	return guard(func() error {
		return call(h, "a registration", interruptible, func(p *regProgram) error {
			if params == nil || loss == nil || grad == nil {
				return errors.New("register: NULL argument")
			}
			x := [6]float64(unsafe.Slice((*float64)(unsafe.Pointer(params)), 6))
			for _, v := range x {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("transform: a parameter is not finite: %v", x)
				}
			}
			t0 := time.Now()
			p.begin()
			f, g, err := p.finest().Eval(x)
			if err = p.end(t0, 1, err); err != nil {
				return err
			}
			*loss = C.double(f)
			copy(unsafe.Slice((*float64)(unsafe.Pointer(grad)), 6), g[:])
			return nil
		})
	})
}

// jsonFloat writes NaN and ±Inf as null.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// tl_register_run registers from init (six doubles about the compiled
// centre), level after level, and sets *result to its outcome as JSON,
// for the caller to free with tl_free: "transform" (transform.json's
// center, rotation, translation and matrix), "loss", "converged",
// "reason", "evaluations" and "trace" (columns step, level, loss, rx, ry,
// rz, tx, ty, tz, seconds). A run that did not converge is not an error:
// "converged" is false and "reason" says why.
//
//export tl_register_run
func tl_register_run(h C.int64_t, init *C.double, result **C.char, interruptible C.int) *C.char {
	return guard(func() error {
		if result != nil {
			*result = nil
		}
		return call(h, "a registration", interruptible, func(p *regProgram) error {
			if init == nil || result == nil {
				return errors.New("register: NULL argument")
			}
			x := unsafe.Slice((*float64)(unsafe.Pointer(init)), 6)
			for _, v := range x {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("init=: a parameter is not finite: %v", x)
				}
			}
			p.r.P.Init = rigid.Transform{Center: p.r.P.Center}.WithParams(x)
			t0 := time.Now()
			ctx := p.begin()
			res, err := p.r.Run(ctx, nil)
			if err = p.end(t0, len(res.Trace), err); err != nil {
				return err
			}
			tr := res.Transform
			out := map[string]any{
				"transform": filejob.TransformJSON{Center: tr.Center, Rotation: tr.Rotation, Translation: tr.Translation, Matrix: tr.Matrix()},
				"loss":      jsonFloat(res.Loss), "converged": res.Converged, "reason": keywords(res.Reason), "evaluations": res.Evals,
			}
			cols := map[string]any{}
			n := len(res.Trace)
			step, level, secs := make([]int, n), make([]int, n), make([]float64, n)
			loss := make([]jsonFloat, n)
			var par [6][]jsonFloat
			for j := range par {
				par[j] = make([]jsonFloat, n)
			}
			for i, s := range res.Trace {
				step[i], level[i], loss[i], secs[i] = s.N, s.Level, jsonFloat(s.Loss), s.Seconds
				for j := range 6 {
					par[j][i] = jsonFloat(s.Params[j])
				}
			}
			cols["step"], cols["level"], cols["loss"], cols["seconds"] = step, level, loss, secs
			for j, name := range []string{"rx", "ry", "rz", "tx", "ty", "tz"} {
				cols[name] = par[j]
			}
			out["trace"] = cols
			b, err := json.Marshal(out)
			if err != nil {
				return err
			}
			*result = C.CString(string(b))
			return nil
		})
	})
}
