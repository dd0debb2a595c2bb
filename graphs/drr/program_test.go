package drr

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tapeloop/tapeloop/internal/volume"
	"github.com/tapeloop/tapeloop/internal/workloadtest"
)

// A Program renders what a Job of the same Config renders, call after
// call; the volume it was given is left as it was.
func TestProgramMatchesTheJob(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), {Method: "trilinear", Post: "1-exp(-p)"}, {Method: "siddon", Mu: "h*2"}} {
		job := smallJob(t, c)
		var want []float32
		job.s.Image = func(_ int, img []float32, _, _ float32) error { want = append(want, img...); return nil }
		if _, err := cpu(t).WithBatch(2).Run(context.Background(), job); err != nil {
			t.Fatal(err)
		}

		v := volume.Phantom(24, 192, c.Water())
		orig := slices.Clone(v.V)
		p, err := Compile(c, v, 12, 10, workloadtest.CPU(t, 3, ""))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(v.V, orig) {
			t.Errorf("%+v: Compile changed the caller's volume", c)
		}
		poses, err := p.Orbit(5, 1020, 510, 16)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 5*12*10)
		for range 2 {
			if err := p.Run(poses, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%+v: the program's images differ from the job's", c)
			}
		}
		if p.AllMissed {
			t.Errorf("%+v: every ray missed", c)
		}
		p.Close()
	}
}

// Config.Spacing and Origin are an array's voxel size and placement: the
// same images as a volume that carries them itself, and other images than
// the volume's own, 1 mm and 0.
func TestCompileSpacingIsTheArrays(t *testing.T) {
	spacing, origin := [3]float64{1.5, 2, 2.5}, [3]float64{-30, -40, -50}
	render := func(c Config, v *volume.Volume) []float32 {
		t.Helper()
		p, err := Compile(c, v, 9, 8, workloadtest.CPU(t, 0, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		// Poses about the placed volume's centre, the same for every case.
		q, err := Compile(DefaultConfig(), &volume.Volume{V: v.V, N: v.N, Spacing: spacing, Origin: origin}, 9, 8, workloadtest.CPU(t, 0, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		poses, err := q.Orbit(3, 1020, 510, 8)
		if err != nil {
			t.Fatal(err)
		}
		img := make([]float32, 3*9*8)
		if err := p.Run(poses, img); err != nil {
			t.Fatal(err)
		}
		return img
	}
	ph := volume.Phantom(20, 192, DefaultMuWater)
	array := func() *volume.Volume {
		return &volume.Volume{V: ph.V, N: ph.N, Spacing: [3]float64{1, 1, 1}}
	}
	c := DefaultConfig()
	c.Spacing, c.Origin = &spacing, &origin
	placed := render(c, array())
	own := render(DefaultConfig(), &volume.Volume{V: ph.V, N: ph.N, Spacing: spacing, Origin: origin})
	if !slices.Equal(placed, own) {
		t.Errorf("Spacing and Origin given: other images than a volume placed so")
	}
	if slices.Equal(render(DefaultConfig(), array()), own) {
		t.Errorf("Spacing and Origin changed nothing")
	}
}

func TestCompileErrors(t *testing.T) {
	v := volume.Phantom(8, 192, DefaultMuWater)
	for _, c := range []struct {
		name string
		cfg  func(*Config)
		v    *volume.Volume
		rows int
		want string
	}{
		{"method", func(c *Config) { c.Method = "joseph" }, v, 4, `--method "joseph"`},
		{"detector", func(*Config) {}, v, 0, "--detector 0x4: want R, C ≥ 1"},
		{"no volume", func(*Config) {}, nil, 4, "--volume: need an (X, Y, Z) array"},
		{"short volume", func(*Config) {}, &volume.Volume{V: v.V[:7], N: v.N, Spacing: v.Spacing}, 4, "--volume: need an (X, Y, Z) array"},
		{"spacing 0", func(c *Config) { c.Spacing = &[3]float64{1, 0, 1} }, v, 4, "--volume: volume: spacing [1 0 1]"},
		{"mu non-finite", func(c *Config) { c.Mu = "log(h-h)" }, v, 4, "--mu \"log(h-h)\": gave 512 non-finite attenuations"},
	} {
		cfg := DefaultConfig()
		c.cfg(&cfg)
		p, err := Compile(cfg, c.v, c.rows, 4, workloadtest.CPU(t, 0, ""))
		if err == nil {
			p.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
