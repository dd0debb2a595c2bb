package shard

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/internal/npy"
)

// piece is where one shard file sits in its run: shard index of count,
// holding the items [lo, hi).
type piece struct {
	path         string
	index, count int
	lo, hi       int
}

// Dup is a shard held by more than one file.
type Dup struct {
	Index int
	Paths []string
}

// Coverage is which shards of a split into Count a set of files holds:
// the shards no file holds (Missing, ascending) and those more than one
// does (Dups, by index).
type Coverage struct {
	Count, Items int
	What         string // the items: rows, combinations or poses
	Missing      []int
	Dups         []Dup
}

// Complete reports whether every shard is held once.
func (c Coverage) Complete() bool { return len(c.Missing) == 0 && len(c.Dups) == 0 }

// ArrayList is the shards as SLURM's --array takes them, runs of
// consecutive ones as ranges: "3,7", "0-2,5".
func ArrayList(shards []int) string {
	var b strings.Builder
	for k := 0; k < len(shards); {
		j := k
		for j+1 < len(shards) && shards[j+1] == shards[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(shards[k]))
		if j > k {
			b.WriteString("-" + strconv.Itoa(shards[j]))
		}
		k = j + 1
	}
	return b.String()
}

// coverage is which shards pieces hold, when all of them are shards of
// one split of total items into the same count, each holding its own
// range; ok false otherwise (shards of two splits).
func coverage(pieces []piece, total int, what string) (c Coverage, ok bool) {
	if len(pieces) == 0 {
		return c, false
	}
	c = Coverage{Count: pieces[0].count, Items: total, What: what}
	held := map[int][]string{}
	for _, p := range pieces {
		lo, hi := Rows(p.index, p.count, total)
		if p.count != c.Count || p.index < 0 || p.index >= p.count || p.lo != lo || p.hi != hi {
			return c, false
		}
		held[p.index] = append(held[p.index], p.path)
	}
	for i := range c.Count {
		switch paths := held[i]; {
		case len(paths) == 0:
			c.Missing = append(c.Missing, i)
		case len(paths) > 1:
			c.Dups = append(c.Dups, Dup{i, paths})
		}
	}
	return c, true
}

// andList joins words as "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// missingText says which shards of c are missing, with their items.
func (c Coverage) missingText() string {
	ranges := make([]string, len(c.Missing))
	for k, i := range c.Missing {
		lo, hi := Rows(i, c.Count, c.Items)
		ranges[k] = fmt.Sprintf("[%d, %d)", lo, hi)
	}
	noun := "shards"
	if len(c.Missing) == 1 {
		noun = "shard"
	}
	return fmt.Sprintf("%s %s of %d %s missing: no file holds %s %s; compute them again (a SLURM array: sbatch --array=%s)",
		noun, andList(intWords(c.Missing)), c.Count, map[bool]string{true: "is", false: "are"}[len(c.Missing) == 1],
		c.What, andList(ranges), ArrayList(c.Missing))
}

// dupText says which files hold the same shard d of c.
func (c Coverage) dupText(d Dup) string {
	lo, hi := Rows(d.Index, c.Count, c.Items)
	return fmt.Sprintf("%s hold the same %s [%d, %d) (shard %d of %d)", andList(d.Paths), c.What, lo, hi, d.Index, c.Count)
}

func intWords(v []int) []string {
	w := make([]string, len(v))
	for k, x := range v {
		w[k] = strconv.Itoa(x)
	}
	return w
}

// Err is nil for a complete set, else one line naming every missing
// shard, then every one held twice.
func (c Coverage) Err() error {
	if c.Complete() {
		return nil
	}
	var parts []string
	if len(c.Missing) > 0 {
		parts = append(parts, c.missingText())
	}
	for _, d := range c.Dups {
		parts = append(parts, c.dupText(d))
	}
	return fmt.Errorf("%w: %s", ErrShards, strings.Join(parts, "; "))
}

// checkPieces checks that pieces cover the items [0, total) once each: for
// shards of one split, naming every missing and duplicated shard; else
// (shards of different splits) naming the first gap or overlap.
func checkPieces(pieces []piece, total int, what string) error {
	if c, ok := coverage(pieces, total, what); ok {
		return c.Err()
	}
	sorted := slices.Clone(pieces)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].lo < sorted[j].lo })
	spans := make([]span, len(sorted))
	for i, p := range sorted {
		spans[i] = span{p.path, p.lo, p.hi}
	}
	return checkCover(spans, total, what)
}

// Report is what Check found in a set of shard files.
type Report struct {
	Workload string // "affinity", Wavelet or DRR
	Coverage
	// Problems are the files that are not shards of the first file's
	// run, or whose metadata cannot be read, one line each.
	Problems []string
}

// OK reports whether the set merges: every shard once, no other file.
func (r Report) OK() bool { return r.Complete() && len(r.Problems) == 0 }

// Lines is the report as a user reads it: what the set is, every missing
// shard, every one held by several files, every file that does not belong,
// and the --array list to resubmit the missing ones.
func (r Report) Lines() []string {
	var l []string
	if r.Count > 0 {
		held := r.Count - len(r.Missing)
		l = append(l, fmt.Sprintf("%s run split into %d shards of %d %s: %d held, %d missing, %d held by more than one file",
			r.Workload, r.Count, r.Items, r.What, held, len(r.Missing), len(r.Dups)))
	}
	for _, i := range r.Missing {
		lo, hi := Rows(i, r.Count, r.Items)
		l = append(l, fmt.Sprintf("missing: shard %d (%s [%d, %d))", i, r.What, lo, hi))
	}
	for _, d := range r.Dups {
		l = append(l, fmt.Sprintf("duplicated: shard %d in %s", d.Index, strings.Join(d.Paths, ", ")))
	}
	for _, p := range r.Problems {
		l = append(l, "does not belong: "+p)
	}
	switch {
	case len(r.Missing) > 0:
		l = append(l, "resubmit: --array="+ArrayList(r.Missing))
	case r.OK():
		l = append(l, "complete: every shard is held once")
	}
	if len(r.Dups) > 0 {
		l = append(l, "keep one file of each duplicated shard")
	}
	return l
}

// Check reads the metadata of the shard files at paths (of any workload)
// and reports which shards of their run are missing and which are held by
// more than one file; a file of another run, of a different split, or not
// a shard is a problem, listed with the rest; the error is for no files at
// all. It opens one file at a time and writes nothing.
func Check(paths []string) (Report, error) {
	var r Report
	type read struct {
		path     string
		workload string
		aff      Meta
		rng      RangeMeta
	}
	var all []read
	for _, p := range paths {
		kind, err := Kind(p)
		if err != nil {
			r.Problems = append(r.Problems, oneLine(err))
			continue
		}
		z, err := npy.OpenNPZ(p)
		if err != nil {
			r.Problems = append(r.Problems, oneLine(err))
			continue
		}
		x := read{path: p, workload: kind}
		if kind == "affinity" {
			x.aff, err = ReadMeta(z, p)
		} else {
			x.rng, err = readRangeMeta(z, p)
		}
		z.Close()
		if err != nil {
			r.Problems = append(r.Problems, oneLine(err))
			continue
		}
		all = append(all, x)
	}
	if len(all) == 0 {
		if len(r.Problems) == 0 {
			return r, fmt.Errorf("%w: no shard files given", ErrShards)
		}
		return r, nil
	}
	ref := all[0]
	r.Workload = ref.workload
	what := map[string]string{"affinity": "rows", Wavelet: "combinations", DRR: "poses"}[ref.workload]
	var pieces []piece
	total := 0
	for _, x := range all {
		var p piece
		switch {
		case x.workload != ref.workload:
			r.Problems = append(r.Problems, fmt.Sprintf("%s is a %s shard and %s a %s one", x.path, x.workload, ref.path, ref.workload))
			continue
		case x.workload == "affinity":
			m, rm := x.aff, ref.aff
			if m.Device != rm.Device || m.TF32 != rm.TF32 || m.N != rm.N || m.D != rm.D || m.Metric != rm.Metric || m.Dtype != rm.Dtype || m.Fingerprint != rm.Fingerprint || m.TopK != rm.TopK {
				r.Problems = append(r.Problems, fmt.Sprintf("%s is from a different run than %s", x.path, ref.path))
				continue
			}
			p, total = piece{x.path, m.Index, m.Count, m.Lo, m.Hi}, m.N
		default:
			m := x.rng
			if d := rangeDiffs(m, ref.rng, what); len(d) > 0 || !slices.Equal(m.Formats, ref.rng.Formats) || m.Pixel != ref.rng.Pixel {
				r.Problems = append(r.Problems, fmt.Sprintf("%s is from a different run than %s", x.path, ref.path))
				continue
			}
			p, total = piece{x.path, m.Index, m.Count, m.Lo, m.Hi}, m.Items
		}
		if len(pieces) > 0 && p.count != pieces[0].count {
			r.Problems = append(r.Problems, fmt.Sprintf("%s is shard %d of %d, not of %d as %s", x.path, p.index, p.count, pieces[0].count, pieces[0].path))
			continue
		}
		if lo, hi := Rows(p.index, p.count, total); lo != p.lo || hi != p.hi {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: shard %d of %d holds %s [%d, %d), not [%d, %d): the shard is corrupt", x.path, p.index, p.count, what, p.lo, p.hi, lo, hi))
			continue
		}
		pieces = append(pieces, p)
	}
	if c, ok := coverage(pieces, total, what); ok {
		r.Coverage = c
	}
	return r, nil
}

// oneLine is err's message on one line.
func oneLine(err error) string {
	var s string
	if err != nil {
		s = err.Error()
	}
	s = strings.TrimPrefix(s, ErrShards.Error()+": ")
	return strings.ReplaceAll(s, "\n", " ")
}
