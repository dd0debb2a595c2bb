package plot

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// table is a CSV file read whole: its header and its records.
type table struct {
	path   string
	header []string
	rows   [][]string
}

// col is the index of column name, or -1.
func (t table) col(name string) int { return slices.Index(t.header, name) }

// floats reads column name as numbers ("nan", "inf" and empty cells are NaN
// or ±Inf as strconv reads them; an empty cell is NaN).
func (t table) floats(name string) ([]float64, error) {
	j := t.col(name)
	if j < 0 {
		return nil, fmt.Errorf("%s: %w: no column %q", t.path, ErrInput, name)
	}
	v := make([]float64, len(t.rows))
	for i, r := range t.rows {
		s := strings.TrimSpace(r[j])
		if s == "" {
			v[i] = nan
			continue
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: line %d, column %s: %q is not a number", t.path, ErrInput, i+2, name, r[j])
		}
		v[i] = x
	}
	return v, nil
}

func readCSV(path string, cfg Config) (figure, error) {
	column := cfg.Column
	data, err := readFile(path)
	if err != nil {
		return figure{}, err
	}
	rd := csv.NewReader(bytes.NewReader(data))
	recs, err := rd.ReadAll()
	if err != nil {
		return figure{}, fmt.Errorf("%s: %w: not a CSV file (%v)", path, ErrInput, err)
	}
	if len(recs) == 0 {
		return figure{}, fmt.Errorf("%s: %w: the file is empty", path, ErrInput)
	}
	t := table{path: path, header: recs[0], rows: recs[1:]}
	for i := range t.header {
		t.header[i] = strings.TrimSpace(t.header[i])
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if t.col(n) < 0 {
				return false
			}
		}
		return true
	}
	kind := ""
	switch {
	case has("theta", "phi", "xi"):
		kind = "wavelet"
	case has("step", "level", "loss", "rx", "ry", "rz", "tx", "ty", "tz"):
		kind = "trace"
	case has("series", "iteration", "seconds"), has("series", "run", "seconds"):
		kind = "times"
	default:
		return figure{}, fmt.Errorf("%s: %w: not a wavelet CSV (theta,phi,xi,…), a registration trace (step,level,loss,rx,…) or a times CSV (series,iteration,seconds or series,run,seconds): its header is %q",
			path, ErrInput, strings.Join(t.header, ","))
	}
	if column != "" && kind != "wavelet" {
		return figure{}, fmt.Errorf("%s: %w: --column picks a wavelet CSV's column; this is a %s CSV", path, ErrInput, kind)
	}
	if cfg.Title != "" && kind != "times" {
		return figure{}, fmt.Errorf("%s: %w: --title names a times CSV's figure; this is a %s CSV", path, ErrInput, kind)
	}
	if len(t.rows) == 0 {
		return figure{}, fmt.Errorf("%s: %w: the %s CSV has a header and no rows", path, ErrInput, kind)
	}
	switch kind {
	case "wavelet":
		return readWavelet(t, column)
	case "trace":
		return readTrace(t)
	default:
		return readTimes(t, cfg.Title)
	}
}
