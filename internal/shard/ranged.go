package shard

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/tapeloop/tapeloop/internal/npy"
	"github.com/tapeloop/tapeloop/internal/sysmem"
)

// RangeFormat names the format of the shard files of the workloads whose
// items are independent (the wavelet sweep's combinations, the DRR's
// poses), and its version.
const RangeFormat = "tapeloop-shard/1"

// The workloads whose shards are RangeMeta's.
const (
	Wavelet = "wavelet"
	DRR     = "drr"
)

// RangeMeta is what a wavelet or DRR shard records about itself: the
// workload, the items [Lo, Hi) of Items it holds, its index of Count, and
// a fingerprint of everything the items' values depend on (the input, every
// parameter and formula, the device kind). The other fields describe the
// output to assemble: the CSV header of a wavelet sweep, the detector of a
// DRR and whether it writes PNGs.
type RangeMeta struct {
	Format      string `json:"format"`
	Workload    string `json:"workload"`
	Items       int    `json:"items"`
	Lo          int    `json:"lo"`
	Hi          int    `json:"hi"`
	Index       int    `json:"index"`
	Count       int    `json:"count"`
	Fingerprint string `json:"fingerprint"`
	Header      string `json:"header,omitempty"`
	Rows        int    `json:"rows,omitempty"`
	Cols        int    `json:"cols,omitempty"`
	PNG         bool   `json:"png,omitempty"`
	// PNGScale is how the merge scales the PNGs: "" (each image its own
	// range), "global" (the run's range) or "window" (PNGWindow, the lowest
	// and highest value mapped).
	PNGScale  string     `json:"png_scale,omitempty"`
	PNGWindow [2]float64 `json:"png_window,omitzero"`
	// Formats are the files of a DRR's images the merge writes (npy, mha,
	// tiff); none: drr.npy alone. Pixel is the detector's (column, row)
	// pixel size in mm that drr.mha and drr.tiff record, zero when the
	// poses' differ.
	Formats []string   `json:"formats,omitempty"`
	Pixel   [2]float64 `json:"pixel,omitzero"`
}

// WriteRangeMeta writes meta.json into z.
func WriteRangeMeta(z *npy.NPZWriter, m RangeMeta) error {
	m.Format = RangeFormat
	return writeJSON(z, "meta.json", m)
}

// metaLimit is the largest meta.json read.
const metaLimit = 1 << 16

// Kind opens the shard at path and says which workload it is of:
// "affinity", Wavelet or DRR.
func Kind(path string) (string, error) {
	z, err := npy.OpenNPZ(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrShards, err)
	}
	defer z.Close()
	b, err := z.ReadRaw("meta.json", metaLimit)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not a tapeloop shard: %v", ErrShards, path, err)
	}
	var m struct {
		Format   any `json:"format"`
		Workload any `json:"workload"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("%w: %s is not a tapeloop shard: meta.json: %v", ErrShards, path, err)
	}
	switch m.Format {
	case Format:
		return "affinity", nil
	case RangeFormat:
		if m.Workload == Wavelet || m.Workload == DRR {
			return m.Workload.(string), nil
		}
		return "", fmt.Errorf("%w: %s: workload %v: want wavelet or drr", ErrShards, path, m.Workload)
	}
	return "", fmt.Errorf("%w: %s is not a tapeloop shard (format %v)", ErrShards, path, m.Format)
}

// RangeShard is an open wavelet or DRR shard.
type RangeShard struct {
	Path string
	Z    *npy.NPZ
	Meta RangeMeta
}

// readRangeMeta reads and checks meta.json of an open shard.
func readRangeMeta(z *npy.NPZ, path string) (RangeMeta, error) {
	b, err := z.ReadRaw("meta.json", metaLimit)
	if err != nil {
		return RangeMeta{}, fmt.Errorf("%w: %s is not a tapeloop shard: %v", ErrShards, path, err)
	}
	var m RangeMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return RangeMeta{}, fmt.Errorf("%w: %s is not a tapeloop shard: meta.json: %v", ErrShards, path, err)
	}
	what := map[string]string{Wavelet: "combinations", DRR: "poses"}[m.Workload]
	switch {
	case m.Format != RangeFormat || what == "":
		return m, fmt.Errorf("%w: %s is not a wavelet or DRR shard (format %q, workload %q)", ErrShards, path, m.Format, m.Workload)
	case m.Items < 1 || m.Lo < 0 || m.Hi > m.Items || m.Lo >= m.Hi:
		return m, fmt.Errorf("%w: %s: %s [%d, %d) of %d make no sense", ErrShards, path, what, m.Lo, m.Hi, m.Items)
	case m.Count < 1 || m.Index < 0 || m.Index >= m.Count:
		return m, fmt.Errorf("%w: %s: shard %d of %d makes no sense", ErrShards, path, m.Index, m.Count)
	case m.Fingerprint == "":
		return m, fmt.Errorf("%w: %s: no fingerprint", ErrShards, path)
	case m.Workload == Wavelet && m.Header == "":
		return m, fmt.Errorf("%w: %s: no CSV header", ErrShards, path)
	case m.Workload == DRR && (m.Rows < 1 || m.Cols < 1):
		return m, fmt.Errorf("%w: %s: a detector of %dx%d pixels makes no sense", ErrShards, path, m.Rows, m.Cols)
	}
	return m, nil
}

// OpenRange opens the shards of one wavelet or DRR run and checks that
// they are all of workload, from the same run (fingerprint, items and
// output description), and cover the items [0, Items) exactly once. It
// returns them in the order of their items; close them with CloseAll.
func OpenRange(workload string, paths []string) (_ []RangeShard, err error) {
	var all []RangeShard
	defer func() {
		if err != nil {
			CloseAll(all)
		}
	}()
	for _, p := range paths {
		z, err := npy.OpenNPZ(p)
		if errors.Is(err, syscall.EMFILE) {
			return nil, fmt.Errorf("%w: %w (the merge of %d shards keeps them all open)", ErrShards, sysmem.WithFileLimit(err), len(paths))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrShards, err)
		}
		m, err := readRangeMeta(z, p)
		if err != nil {
			z.Close()
			return nil, err
		}
		all = append(all, RangeShard{p, z, m})
	}
	what := map[string]string{Wavelet: "combinations", DRR: "poses"}[workload]
	ref := all[0].Meta
	for _, o := range all {
		m := o.Meta
		if m.Workload != workload {
			return nil, fmt.Errorf("%w: %s is a %s shard, not a %s one: merge the shards of one run", ErrShards, o.Path, m.Workload, workload)
		}
		if d := rangeDiffs(m, ref, what); len(d) > 0 {
			return nil, fmt.Errorf("%w: %s is from a different run than %s: %s", ErrShards, o.Path, all[0].Path, strings.Join(d, "; "))
		}
		if !slices.Equal(m.Formats, ref.Formats) || m.Pixel != ref.Pixel {
			return nil, fmt.Errorf("%w: %s was rendered with --format %s and %s with --format %s: give every shard of a run the same --format",
				ErrShards, o.Path, formatList(m.Formats), all[0].Path, formatList(ref.Formats))
		}
	}
	pieces := make([]piece, len(all))
	for i, o := range all {
		pieces[i] = piece{o.Path, o.Meta.Index, o.Meta.Count, o.Meta.Lo, o.Meta.Hi}
	}
	if err := checkPieces(pieces, ref.Items, what); err != nil {
		return nil, err
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Meta.Lo < all[j].Meta.Lo })
	return all, nil
}

// CloseAll closes the shards.
func CloseAll(all []RangeShard) {
	for _, o := range all {
		o.Z.Close()
	}
}

// formatList is a shard's Formats as --format writes them.
func formatList(f []string) string {
	if len(f) == 0 {
		return "npy"
	}
	return strings.Join(f, ",")
}

// rangeDiffs names what differs between the metadata of two shards that
// must come from one run, each as "this shard's / the first's"; none for
// shards of one run.
func rangeDiffs(m, ref RangeMeta, what string) []string {
	var d []string
	if m.Fingerprint != ref.Fingerprint {
		d = append(d, fmt.Sprintf("fingerprint %s / %s (another input, parameter, formula or device)", m.Fingerprint, ref.Fingerprint))
	}
	if m.Items != ref.Items {
		d = append(d, fmt.Sprintf("%d / %d %s", m.Items, ref.Items, what))
	}
	if m.Header != ref.Header {
		d = append(d, fmt.Sprintf("columns %q / %q", m.Header, ref.Header))
	}
	if m.Rows != ref.Rows || m.Cols != ref.Cols {
		d = append(d, fmt.Sprintf("images of %d×%d / %d×%d pixels", m.Rows, m.Cols, ref.Rows, ref.Cols))
	}
	if m.PNG != ref.PNG {
		d = append(d, fmt.Sprintf("PNGs %t / %t", m.PNG, ref.PNG))
	}
	return d
}
