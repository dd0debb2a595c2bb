package filejob

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tapeloop/tapeloop/internal/checkpoint"
	"github.com/tapeloop/tapeloop/internal/engine"
)

// TestResumeFromCheckpoint runs each workload (wavelet with shared kernels
// and reflect padding, DRR with PNGs, and a shard of each) to its end
// without committing, so that its checkpoint holds every batch, then cuts
// the checkpoint back (to nothing, to part of it with a torn last record,
// or not at all) and resumes: the outputs must be the uninterrupted run's,
// byte for byte, and the checkpoint gone.
func TestResumeFromCheckpoint(t *testing.T) {
	d, err := engine.Open(engine.Engine{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	wavelet := func(shard *string) func(out string, resume bool) (Task, error) {
		return func(out string, resume bool) (Task, error) {
			s := WaveletSpec{Config: DefaultWaveletSpec().Config, Size: "12x10x9", Seed: 5, Theta: "0:pi:4", Phi: "0:pi:3", Xi: "1,2", Out: out, Resume: resume, Shard: shard}
			return OpenWavelet(s, d, true)
		}
	}
	drr := func(shard *string) func(out string, resume bool) (Task, error) {
		return func(out string, resume bool) (Task, error) {
			s := DefaultDRRSpec()
			s.Size, s.Orbit, s.Detector, s.Pixel, s.PNG, s.Shard = 24, 9, "12x10", 20, shard == nil, shard
			s.Out, s.Resume = out, resume
			return OpenDRR(s, d, true)
		}
	}
	half := "1/2"
	for _, c := range []struct {
		name     string
		open     func(out string, resume bool) (Task, error)
		out      string // the output's name
		ckpt     string // the checkpoint's, in the output's directory
		record   int    // bytes of a record with its item and checksum
		sharding bool
	}{
		{"wavelet", wavelet(nil), "out.csv", "out.csv.ckpt", 8*5 + 4, false},
		{"wavelet shard", wavelet(&half), "out.npz", "out.npz.ckpt", 8*5 + 4, true},
		{"drr", drr(nil), "out", "out/drr.npy.ckpt", 8 + 8 + 4*120 + 4, false},
		{"drr shard", drr(&half), "out.npz", "out.npz.ckpt", 8 + 8 + 4*120 + 4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(out string, resume, commit bool) {
				t.Helper()
				task, err := c.open(out, resume)
				if err != nil {
					t.Fatal(err)
				}
				defer task.Close()
				if _, err := d.Run(context.Background(), task.Job()); err != nil {
					t.Fatal(err)
				}
				if commit {
					if err := task.Commit(); err != nil {
						t.Fatal(err)
					}
				}
			}
			ref := t.TempDir()
			run(filepath.Join(ref, c.out), false, true)
			for _, keep := range []float64{0, 0.5, 1} {
				dir := t.TempDir()
				out, ckpt := filepath.Join(dir, c.out), filepath.Join(dir, c.ckpt)
				run(out, false, false)
				n, err := checkpoint.Count(ckpt)
				if err != nil {
					t.Fatalf("no checkpoint kept: %v", err)
				}
				cut := int64(float64(n)*(1-keep)) * int64(c.record)
				if keep == 0.5 {
					cut += 3 // and a torn record
				}
				fi, _ := os.Stat(ckpt)
				if err := os.Truncate(ckpt, fi.Size()-cut); err != nil {
					t.Fatal(err)
				}
				run(out, true, true)
				sameOutputs(t, filepath.Join(ref, c.out), out)
				if _, err := os.Stat(ckpt); err == nil {
					t.Errorf("keep %g: the checkpoint is still there after the run finished", keep)
				}
			}
		})
	}
}

// sameOutputs fails unless got (a file, or a directory of files) has
// want's bytes.
func sameOutputs(t *testing.T, want, got string) {
	t.Helper()
	paths := []string{""}
	if entries, err := os.ReadDir(want); err == nil {
		paths = paths[:0]
		for _, e := range entries {
			paths = append(paths, e.Name())
		}
		if g, _ := os.ReadDir(got); len(g) != len(entries) {
			t.Errorf("%s holds %d entries, want %d", got, len(g), len(entries))
		}
	}
	for _, p := range paths {
		w, _ := os.ReadFile(filepath.Join(want, p))
		g, err := os.ReadFile(filepath.Join(got, p))
		if err != nil || !bytes.Equal(w, g) || len(w) == 0 {
			t.Errorf("%s differs from the uninterrupted run's (%v)", filepath.Join(got, p), err)
		}
	}
}
