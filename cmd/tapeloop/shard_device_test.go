package main

import (
	"archive/zip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withMeta rewrites the shard archive at path with edit applied to its
// meta.json.
func withMeta(t *testing.T, path string, edit func(string) string) {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	var ms []member
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == "meta.json" {
			b = []byte(edit(string(b)))
		}
		ms = append(ms, member{f.Name, b, false})
	}
	z.Close()
	if err := os.WriteFile(path, zipOf(ms...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAffinityShardsRecordTheirDevice: an affinity shard records the device
// kind it was computed on and --tf32; merge refuses shards of two devices,
// in one line naming both, and writes nothing.
func TestAffinityShardsRecordTheirDevice(t *testing.T) {
	dir := t.TempDir()
	shards := runShards(t, dir, "s", 2, "affinity", "--quiet", "--n", "40", "--height", "4", "--width", "5")
	z, err := zip.OpenReader(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	var meta []byte
	for _, f := range z.File {
		if f.Name == "meta.json" {
			r, _ := f.Open()
			meta, _ = io.ReadAll(r)
			r.Close()
		}
	}
	z.Close()
	if !strings.Contains(string(meta), `"device":"cpu"`) || strings.Contains(string(meta), `"tf32"`) {
		t.Errorf("meta.json %s: want the device, cpu, and no --tf32", meta)
	}
	withMeta(t, shards[1], func(m string) string {
		return strings.Replace(m, `"device":"cpu"`, `"device":"cuda","tf32":true`, 1)
	})
	out := filepath.Join(dir, "m.npy")
	mergeRefuses(t, "cpu and cuda --tf32", out, "was computed on cuda with --tf32 and "+shards[0]+" on cpu", shards...)
}
