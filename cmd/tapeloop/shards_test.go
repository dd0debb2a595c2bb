package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runShards runs args as n shard processes, each told its index by
// SLURM_ARRAY_TASK_ID as in a SLURM array (--shards n), into dir/name<i>.npz.
func runShards(t *testing.T, dir, name string, n int, args ...string) []string {
	t.Helper()
	var paths []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("%s%d.npz", name, i))
		cmd := exec.Command(binary, append(args, "--shards", fmt.Sprint(n), "--out", p)...)
		cmd.Env = append(filterEnv(os.Environ(), "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "JOB_COMPLETION_INDEX"),
			fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", i))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("shard %d of %v: %v: %s", i, args, err, out)
		}
		paths = append(paths, p)
	}
	return paths
}

// mergeRefuses runs merge on shards into out and checks that it fails in
// one line saying want, leaving no output.
func mergeRefuses(t *testing.T, what, out, want string, shards ...string) {
	t.Helper()
	_, se, code := run(t, append([]string{"merge", "--out", out}, shards...)...)
	if code != 1 || !strings.Contains(se, want) || strings.Count(strings.TrimSpace(se), "\n") > 0 {
		t.Errorf("%s: exit %d, stderr %q; want 1 and one line with %q", what, code, se, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s: output written", what)
	}
}

// TestWaveletShardsMergeBitForBit runs a sweep, in both boundary modes,
// as three shard processes and merges them: the CSV must be the single
// run's byte for byte. The sweep's ξ values give combinations paddings,
// in reflect mode, that differ from those they get in a sweep of their
// shard alone (wavelet.Pads groups sizes across the sweep), and round
// kernels (ξ = 1) shared with combinations of other shards. Merge must
// refuse a missing shard and shards of another volume or kernel scale.
func TestWaveletShardsMergeBitForBit(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, b := range []string{"reflect", "wrap"} {
		args := []string{"wavelet", "--quiet", "--size", "20x18x16", "--theta", "0:pi:3", "--phi", "0:pi:2", "--xi", "1,1.5,2.5,4", "--boundary", b}
		if _, se, code := run(t, append(args, "--out", p(b+".csv"))...); code != 0 {
			t.Fatalf("%s: exit %d: %s", b, code, se)
		}
		shards := runShards(t, dir, b, 3, args...)
		out := p(b + "-merged.csv")
		if _, se, code := run(t, "merge", "--out", out, shards[2], shards[0], shards[1]); code != 0 {
			t.Fatalf("%s: merge: exit %d: %s", b, code, se)
		}
		want, _ := os.ReadFile(p(b + ".csv"))
		got, _ := os.ReadFile(out)
		if len(want) == 0 || !bytes.Equal(got, want) {
			t.Errorf("%s: merged CSV differs from the single run:\n%s\nwant\n%s", b, got, want)
		}
		if b != "reflect" {
			continue
		}
		// A shard computed as a sweep of its own differs: the test above
		// checks something.
		alone, se, code := run(t, "wavelet", "--quiet", "--size", "20x18x16", "--theta", "0", "--phi", "0", "--xi", "1.5")
		if code != 0 {
			t.Fatalf("alone: exit %d: %s", code, se)
		}
		row := strings.Split(strings.TrimSpace(alone), "\n")[1]
		if strings.Contains(string(want), row+"\n") {
			t.Logf("θ = 0, φ = 0, ξ = 1.5 alone gives the sweep's numbers: the paddings no longer depend on the sweep")
		}
		foreign := runShards(t, dir, "seed", 3, append(args, "--seed", "7")...)
		scale := runShards(t, dir, "scale", 3, append(args, "--a", "1.25")...)
		mergeRefuses(t, "missing", p("missing.csv"), "missing", shards[0], shards[2])
		mergeRefuses(t, "foreign volume", p("foreign.csv"), "different run", shards[0], foreign[1], shards[2])
		mergeRefuses(t, "other kernel scale", p("scale.csv"), "different run", shards[0], shards[1], scale[2])
		mergeRefuses(t, "duplicate", p("dup.csv"), "same combinations", shards[0], shards[1], shards[1], shards[2])
		mergeRefuses(t, "damaged", p("damaged.csv"), "rows.csv: damaged (zip: checksum error)", shards[0], damagedRowsCopy(t, shards[1]), shards[2])
	}
}

// damagedRowsCopy is a copy of wavelet shard file path with one digit of
// its rows.csv changed into another digit, as a disk or a transfer might:
// still a well-formed CSV of the same lines, so only the member's checksum
// can tell.
func damagedRowsCopy(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for at := 0; ; at++ {
		i := bytes.Index(b[at:], []byte("PK\x03\x04"))
		if i < 0 {
			t.Fatalf("%s: no rows.csv member", path)
		}
		at += i
		name := int(b[at+26]) | int(b[at+27])<<8 // little-endian, as zip writes
		extra := int(b[at+28]) | int(b[at+29])<<8
		if string(b[at+30:at+30+name]) != "rows.csv" {
			continue
		}
		for k := at + 30 + name + extra; k < len(b); k++ {
			if b[k] >= '0' && b[k] <= '8' {
				b[k] ^= 1 // '0' ↔ '1', … '8' → '9'
				bad := path + ".damaged.npz"
				if err := os.WriteFile(bad, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return bad
			}
		}
		t.Fatalf("%s: no digit in rows.csv", path)
	}
}

// TestDRRShardsMergeBitForBit renders poses with PNGs as three shard
// processes and merges them: drr.npy (or with --format, drr.mha and
// drr.tiff) and every PNG must be the single run's byte for byte. Merge
// must refuse a missing shard, shards of another geometry or volume or
// --format, and a mix with wavelet shards.
func TestDRRShardsMergeBitForBit(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	var sdd, siddon []string // shards of another run, and of the siddon case
	for _, c := range []struct {
		m, format string
		stacks    []string
	}{{"siddon", "", []string{"drr.npy"}}, {"trilinear", "", []string{"drr.npy"}}, {"formats", "tiff,mha", []string{"drr.mha", "drr.tiff"}}} {
		m := c.m
		args := []string{"drr", "--quiet", "--size", "24", "--orbit", "7", "--detector", "9x11", "--png"}
		if c.format != "" {
			args = append(args, "--format", c.format) // the siddon case's run, other files
		} else {
			args = append(args, "--method", m)
		}
		if _, se, code := run(t, append(args, "--out", p(m))...); code != 0 {
			t.Fatalf("%s: exit %d: %s", m, code, se)
		}
		shards := runShards(t, dir, m, 3, args...)
		if _, se, code := run(t, "merge", "--out", p(m+"-merged"), shards[1], shards[2], shards[0]); code != 0 {
			t.Fatalf("%s: merge: exit %d: %s", m, code, se)
		}
		if m == "siddon" {
			siddon = shards
			sdd = runShards(t, dir, "sdd", 3, append(args, "--sdd", "1000")...)
		}
		names := append([]string{"geometry.json"}, c.stacks...)
		for i := range 7 {
			names = append(names, fmt.Sprintf("drr_%04d.png", i))
		}
		entries, _ := os.ReadDir(p(m + "-merged"))
		if len(entries) != len(names) {
			t.Errorf("%s: merged directory holds %d files, want %d", m, len(entries), len(names))
		}
		for _, n := range names {
			want, _ := os.ReadFile(filepath.Join(p(m), n))
			got, _ := os.ReadFile(filepath.Join(p(m+"-merged"), n))
			if len(want) == 0 || !bytes.Equal(got, want) {
				t.Errorf("%s: merged %s differs from the single run's", m, n)
			}
		}
		if m == "formats" {
			mergeRefuses(t, "other formats", p("formats-mixed"), "same --format", shards[0], siddon[1], shards[2])
		}
		if m != "siddon" {
			continue
		}
		vol := runShards(t, dir, "vol", 3, append(args, "--mu-water", "0.03")...)
		wav := runShards(t, dir, "wav", 3, "wavelet", "--quiet", "--size", "8x8x8", "--theta", "0", "--phi", "0", "--xi", "1,2,3")
		mergeRefuses(t, "missing", p("missing"), "missing", shards[1], shards[2])
		mergeRefuses(t, "other geometry", p("geometry"), "different run", shards[0], sdd[1], shards[2])
		mergeRefuses(t, "other volume", p("volume"), "different run", vol[0], shards[1], shards[2])
		mergeRefuses(t, "mixed workloads", p("mixed"), "wavelet", shards[0], wav[1], shards[2])
		mergeRefuses(t, "damaged", p("damaged"), "drr: damaged (zip: checksum error)", shards[0], damagedCopy(t, shards[1]), shards[2])
		// The run's geometry.json, which every shard carries, missing,
		// damaged or edited in one of them.
		geo := func(name string, content bool, edit func(raw []byte) []byte) string {
			return rewriteMember(t, shards[1], "geometry.json", name, content, edit)
		}
		mergeRefuses(t, "geometry missing", p("geo-missing"), "geometry.json", shards[0], geo("missing", false, nil), shards[2])
		flip := func(raw []byte) []byte { raw[len(raw)/2] ^= 0x20; return raw }
		mergeRefuses(t, "geometry damaged", p("geo-damaged"), "checksum error", shards[0], geo("damaged", false, flip), shards[2])
		mergeRefuses(t, "geometry edited", p("geo-edited"), "different geometry.json", shards[0], geo("edited", true, bytes.ToUpper), shards[2])
	}
}

// rewriteMember is a copy of the shard archive path, named after what,
// with its member name changed by edit (nil: the member left out). With
// content, edit is given the member's content and the result is written
// afresh, with its own checksum: a well-formed archive of other content.
// Else edit is given the bytes as stored, compressed or not, and the
// member's checksum is kept: the edit damages it.
func rewriteMember(t *testing.T, path, name, what string, content bool, edit func([]byte) []byte) string {
	t.Helper()
	r, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range r.File {
		if f.Name != name {
			if err := w.Copy(f); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if edit == nil {
			continue
		}
		if content {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			m, err := w.Create(name)
			if err == nil {
				_, err = m.Write(edit(b))
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		rc, err := f.OpenRaw()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		h := f.FileHeader
		m, err := w.CreateRaw(&h)
		if err == nil {
			_, err = m.Write(edit(b))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := path + "." + what + ".npz"
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// damagedCopy is a copy of shard file path with one bit of its first
// array's data changed, as a disk or a transfer might.
func damagedCopy(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("\x93NUMPY"))
	if at < 0 || at+200 >= len(b) {
		t.Fatalf("%s: no array to damage", path)
	}
	b[at+200] ^= 0x04
	bad := path + ".damaged.npz"
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return bad
}
