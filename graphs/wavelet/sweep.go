package wavelet

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tapeloop/tapeloop/internal/engine"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/internal/sysmem"
	"github.com/tapeloop/tapeloop/ops"
)

// Combo is one kernel of a wavelet sweep.
type Combo struct{ Theta, Phi, Xi float64 }

// Combos lists the sweep θ outermost, then φ, then ξ.
func Combos(theta, phi, xi []float64) []Combo {
	var c []Combo
	for _, t := range theta {
		for _, p := range phi {
			for _, x := range xi {
				c = append(c, Combo{t, p, x})
			}
		}
	}
	return c
}

// Computable reports whether combination c has a kernel of scale a
// (ops.CheckHat): ξ positive and finite, θ and φ finite. A sweep may hold
// combinations with ξ ≤ 0 (ξ = 0 in a list made with arange(0, 20)):
// their rows hold NaN and the rest of the sweep runs. Sweep refuses a
// non-finite θ, φ or ξ.
func Computable(a float64, c Combo) error {
	if err := ops.CheckHat(a, c.Theta, c.Phi, c.Xi); err != nil {
		return fmt.Errorf("θ = %g, φ = %g, ξ = %g: %w", c.Theta, c.Phi, c.Xi, err)
	}
	return nil
}

// MaxCombos is the most combinations one sweep may have (2²⁴).
const MaxCombos = 1 << 24

// Sweep is every combination of theta, phi and xi, θ outermost, then φ,
// then ξ; errors name the command line's --theta, --phi and --xi. Each
// list must hold a value, every value be finite, and the sweep hold at
// most MaxCombos. A combination with ξ ≤ 0 has no kernel (Computable) and
// is kept: the Job gives its row NaN.
func Sweep(a float64, theta, phi, xi []float64) ([]Combo, error) {
	for _, l := range [...]struct {
		name string
		v    []float64
	}{{"theta", theta}, {"phi", phi}, {"xi", xi}} {
		if len(l.v) == 0 {
			return nil, fmt.Errorf("--%s: empty list", l.name)
		}
	}
	if c := sysmem.Mul(int64(len(theta)), int64(len(phi)), int64(len(xi))); c < 0 || c > MaxCombos {
		return nil, fmt.Errorf("--theta × --phi × --xi: %d × %d × %d combinations; at most %d (2²⁴) in one run: split the sweep into several",
			len(theta), len(phi), len(xi), MaxCombos)
	}
	combos := Combos(theta, phi, xi)
	for _, c := range combos {
		finite := !math.IsNaN(c.Theta+c.Phi+c.Xi) && !math.IsInf(c.Theta+c.Phi+c.Xi, 0)
		if err := Computable(a, c); err != nil && (!finite || ops.CheckHat(a, 0, 0, 1) != nil) {
			return nil, err
		}
	}
	return combos, nil
}

// parseNumber parses a number that may use pi: 2.5, pi, -pi/4, 3pi/2, 0.5*pi.
func parseNumber(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	bad := fmt.Errorf("%q is not a number (e.g. 2.5, pi, pi/4, 3*pi/2)", s)
	num, den, hasDen := strings.Cut(t, "/")
	d := 1.0
	if hasDen {
		var err error
		if d, err = strconv.ParseFloat(strings.TrimSpace(den), 64); err != nil || d == 0 {
			return 0, bad
		}
	}
	num = strings.TrimSpace(num)
	v := 1.0
	if coef, ok := strings.CutSuffix(num, "pi"); ok {
		coef = strings.TrimSuffix(strings.TrimSpace(coef), "*")
		switch coef {
		case "", "+":
		case "-":
			v = -1
		default:
			c, err := strconv.ParseFloat(coef, 64)
			if err != nil {
				return 0, bad
			}
			v = c
		}
		v *= math.Pi
	} else {
		c, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, bad
		}
		v = c
	}
	v /= d
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, bad
	}
	return v, nil
}

// ParseList parses a list of θ, φ or ξ as the command line writes it:
// "a,b,c" or "START:STOP:COUNT" (COUNT values START + k·(STOP − START)/COUNT,
// STOP excluded, like numpy.arange grids), each number a decimal or a
// multiple of pi (pi/4, 3*pi/2, -pi); errors name the flag --name.
func ParseList(name, s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--%s: empty list", name)
	}
	if strings.Contains(s, ":") {
		f := strings.Split(s, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("--%s %q: want START:STOP:COUNT", name, s)
		}
		lo, err := parseNumber(f[0])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		hi, err := parseNumber(f[1])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(f[2]))
		if err != nil || n < 1 || n > MaxCombos {
			return nil, fmt.Errorf("--%s %q: COUNT %q must be an integer from 1 to %d (2²⁴)", name, s, f[2], MaxCombos)
		}
		out := make([]float64, n)
		for k := range out {
			out[k] = lo + float64(k)*(hi-lo)/float64(n)
		}
		return out, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := parseNumber(f)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Supports returns every combination's kernel half-widths along each
// axis: the hat's box (ops.HatSupport), or with a kernel formula k its
// Support, whose error (a kernel that does not decay within the volume)
// is returned; zero for a combination without a kernel (Computable).
func Supports(a float64, k *ops.KernelFormula, combos []Combo) ([][3]int, error) {
	sup := make([][3]int, len(combos))
	if k == nil {
		for i, c := range combos {
			if Computable(a, c) == nil {
				sup[i] = ops.HatSupport(a, c.Theta, c.Phi, c.Xi)
			}
		}
		return sup, nil
	}
	// A formula's reach is found by evaluating it (memoised per
	// combination): in parallel.
	errs := make([]error, len(combos))
	parallel.For(len(combos), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if c := combos[i]; Computable(a, c) == nil {
				sup[i], errs[i] = k.Support(a, c.Theta, c.Phi, c.Xi)
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return sup, nil
}

// Pads returns, for every combination, the padding it runs with in
// reflect mode for a volume of n, given its kernel's half-widths sup
// (Supports), and the largest over all. A kernel of half-widths h needs a
// transform of at least n + 2h along each axis, rounded up to the next
// size the FFT handles fastest; its padding is all that size leaves,
// (size − n)/2. Combinations that share a transform size share one
// transform of the volume, so a size needed by few combinations is merged
// into a larger one where the extra cost of the larger transforms is less
// than the volume's transform it saves (reflectGroups). A combination that
// is not Computable runs nothing: its padding is zero and it takes no
// part in the grouping.
func Pads(n [3]int, a float64, combos []Combo, sup [][3]int) (pads [][3]int, largest [3]int) {
	var dims [][3]int
	var at []int // the combination of each of dims
	for i, c := range combos {
		if Computable(a, c) != nil {
			continue
		}
		var d [3]int
		for k := range 3 {
			d[k] = ops.FFTSize(n[k] + 2*sup[i][k])
		}
		dims, at = append(dims, d), append(at, i)
	}
	dims = reflectGroups(dims)
	pads = make([][3]int, len(combos))
	for j, d := range dims {
		i := at[j]
		for k := range 3 {
			pads[i][k] = (d[k] - n[k]) / 2
			largest[k] = max(largest[k], pads[i][k])
		}
	}
	return pads, largest
}

// volumeCost is what transforming the extended volume costs in units of
// one combination on a transform of the same size: a forward transform and
// the extension, against a product of spectra and an inverse transform.
const volumeCost = 2

// reflectGroups maps each combination's transform size to the one it runs
// with: sizes needed by few combinations are merged, smallest groups first,
// each into the group (or the elementwise larger size of the two) where the
// merge saves most, counting a combination's cost as its transform's
// volume and a group's as volumeCost more.
func reflectGroups(need [][3]int) [][3]int {
	type group struct {
		dims [3]int
		n    int
		into int // the group it was merged into, or -1
	}
	index := map[[3]int]int{}
	var gs []*group
	for _, d := range need {
		if _, ok := index[d]; !ok {
			index[d] = len(gs)
			gs = append(gs, &group{dims: d, into: -1})
		}
		gs[index[d]].n++
	}
	vol := func(d [3]int) float64 { return float64(d[0]) * float64(d[1]) * float64(d[2]) }
	cost := func(d [3]int, n int) float64 { return (float64(n) + volumeCost) * vol(d) }
	order := make([]int, len(gs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return gs[order[a]].n < gs[order[b]].n })
	for _, a := range order {
		ga := gs[a]
		best, save := -1, 0.0
		for b, gb := range gs {
			if b == a || gb.into >= 0 {
				continue
			}
			var m [3]int
			for k := range 3 {
				m[k] = max(ga.dims[k], gb.dims[k])
			}
			if d := cost(ga.dims, ga.n) + cost(gb.dims, gb.n) - cost(m, ga.n+gb.n); d > save {
				best, save = b, d
			}
		}
		if best >= 0 {
			gb := gs[best]
			for k := range 3 {
				gb.dims[k] = max(gb.dims[k], ga.dims[k])
			}
			gb.n += ga.n
			ga.into = best
		}
	}
	out := make([][3]int, len(need))
	for i, d := range need {
		g := index[d]
		for gs[g].into >= 0 {
			g = gs[g].into
		}
		out[i] = gs[g].dims
	}
	return out
}

// kernelKey names the hat of c up to what does not change it: "" never
// matches. With ξ = 1 the hat is round (the same for every θ and φ);
// otherwise it depends on ξ and on its stretched axis n up to sign (ψ is
// symmetric about n and ψ(r) = ψ(−r)), the first row of the rotation.
func kernelKey(c Combo) string {
	if c.Xi == 1 {
		return "round"
	}
	ct, st, cp, sp := math.Cos(c.Theta), math.Sin(c.Theta), math.Cos(c.Phi), math.Sin(c.Phi)
	n := [3]float64{cp * ct, -st, sp * ct}
	for _, v := range n { // the sign: the first clearly nonzero component positive
		if math.Abs(v) > 1e-9 {
			if v < 0 {
				n[0], n[1], n[2] = -n[0], -n[1], -n[2]
			}
			break
		}
	}
	r := func(v float64) float64 { return math.Round(v*1e12) / 1e12 }
	return fmt.Sprintf("%v|%v,%v,%v", c.Xi, r(n[0]), r(n[1]), r(n[2]))
}

// HatPads is Pads for the built-in hat of scale a.
func HatPads(n [3]int, a float64, combos []Combo) (pads [][3]int, largest [3]int) {
	sup, _ := Supports(a, nil, combos) // the hat's own box: never refused
	return Pads(n, a, combos, sup)
}

// MaxSupport is the largest of the half-widths sup (Supports) along each
// axis (ops.WaveletSource.MaxSupport).
func MaxSupport(sup [][3]int) [3]int {
	var m [3]int
	for _, h := range sup {
		for k := range 3 {
			m[k] = max(m[k], h[k])
		}
	}
	return m
}

// AnyNarrow reports whether a hat of scale a of some combination is too
// narrow for the closed form (ops.HatNarrow).
func AnyNarrow(a float64, combos []Combo) bool {
	for _, c := range combos {
		if Computable(a, c) == nil && ops.HatNarrow(a, c.Xi) {
			return true
		}
	}
	return false
}

// CheckPadding refuses a sweep over a volume of n whose largest padding
// is pad when the volume extended by pad on every side, the least any
// transform of the sweep takes, does not fit limit by itself.
func CheckPadding(n, pad [3]int, limit int64) error {
	padded := sysmem.Mul(int64(n[0]+2*pad[0]), int64(n[1]+2*pad[1]), int64(n[2]+2*pad[2]), 4)
	if padded < 0 || padded > limit {
		if padded < 0 {
			padded = math.MaxInt64
		}
		return &engine.BudgetError{Workload: "wavelet's padded volume", Need: padded, Limit: limit}
	}
	return nil
}

// LargestPad is the padding, among pads, whose extended volume (n + 2·pad
// along each axis) holds the most voxels: the largest a sweep padded with
// pads (Pads) extends its volume to, which the per-axis largest padding
// can exceed by far when its kernels are long along different axes.
func LargestPad(n [3]int, pads [][3]int) [3]int {
	var best [3]int
	var most int64 = -1
	for _, p := range pads {
		v := sysmem.Mul(int64(n[0]+2*p[0]), int64(n[1]+2*p[1]), int64(n[2]+2*p[2]))
		if v < 0 {
			return p
		}
		if v > most {
			best, most = p, v
		}
	}
	return best
}

// A SavedResponse is a combination whose response G a run writes to a
// .npy file (--save-response).
type SavedResponse struct {
	Combo int // an index into the sweep's combinations
	File  string
}

// ParseSaveResponses reads --save-response specs, each "θ,φ,ξ:FILE.npy"
// (numbers as in a LIST: 0,pi/4,2:g.npy), against the sweep's
// combinations: each must name one of them that has a kernel (within
// 10⁻⁹ in each value), and each a file of its own.
func ParseSaveResponses(specs []string, a float64, combos []Combo) ([]SavedResponse, error) {
	var out []SavedResponse
	files := map[string]bool{}
	for _, spec := range specs {
		vals, file, ok := strings.Cut(spec, ":")
		file = strings.TrimSpace(file)
		parts := strings.Split(vals, ",")
		if !ok || len(parts) != 3 || !strings.HasSuffix(file, ".npy") {
			return nil, fmt.Errorf("--save-response %q: want THETA,PHI,XI:FILE.npy, e.g. 0,pi/4,2:g.npy", spec)
		}
		var c [3]float64
		for i, s := range parts {
			v, err := parseNumber(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("--save-response %q: %w", spec, err)
			}
			c[i] = v
		}
		near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*max(1, math.Abs(y)) }
		i := slices.IndexFunc(combos, func(k Combo) bool { return near(c[0], k.Theta) && near(c[1], k.Phi) && near(c[2], k.Xi) })
		if i < 0 {
			return nil, fmt.Errorf("--save-response %q: θ = %g, φ = %g, ξ = %g is not a combination of the sweep (--theta, --phi, --xi)", spec, c[0], c[1], c[2])
		}
		if err := Computable(a, combos[i]); err != nil {
			return nil, fmt.Errorf("--save-response %q: %w", spec, err)
		}
		if files[file] {
			return nil, fmt.Errorf("--save-response %q: %s is named twice", spec, file)
		}
		files[file] = true
		out = append(out, SavedResponse{Combo: i, File: file})
	}
	return out, nil
}
