package pairwise

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/tapeloop/tapeloop/internal/cpukern"
	"github.com/tapeloop/tapeloop/internal/parallel"
	"github.com/tapeloop/tapeloop/ops"
)

// Metric is a pairwise affinity between two flattened images x_i, x_j.
type Metric int

// The affinities of the pairwise-affinity workload.
const (
	MetricDot    Metric = iota // Σ x_i·x_j
	MetricCosine               // dot / (‖x_i‖·‖x_j‖)
	MetricL1                   // −Σ |x_i − x_j|
	MetricL2                   // −Σ (x_i − x_j)²
)

var metricNames = []string{"dot", "cosine", "l1", "l2"}

func (m Metric) String() string {
	if m >= 0 && int(m) < len(metricNames) {
		return metricNames[m]
	}
	return fmt.Sprintf("Metric(%d)", int(m))
}

// ParseMetric parses "dot", "cosine", "l1" or "l2".
func ParseMetric(s string) (Metric, error) {
	for i, n := range metricNames {
		if s == n {
			return Metric(i), nil
		}
	}
	return 0, fmt.Errorf("unknown metric %q (want dot, cosine, l1 or l2)", s)
}

// ErrPairInput is wrapped by errors about the images.
var ErrPairInput = errors.New("affinity")

// PairData is the (N, D) matrix of flattened images every row block is
// compared against, held once, in the computation's dtype.
type PairData struct {
	// version counts the Reloads, so that a copy on a device knows to
	// refresh itself.
	version uint64
	N, D    int
	Dtype   tensor.Dtype
	X32     []float32 // row-major (N, D) when Dtype is Float32
	X64     []float64 // when Float64
	// Mapped says the images are a read-only file mapping (page cache),
	// not process memory: Bytes leaves them out.
	Mapped bool
	// U8 holds 8-bit images computed on exactly, in integers (the built-in
	// metrics on the CPU; X32 and X64 are then nil and Dtype is the
	// output's).
	U8   *cpukern.U8Rows
	norm []float64 // ‖x_j‖, for cosine
	// Float32 l2 on the packed matrix product (see centre): mu is the
	// images' mean, the shift the product subtracts from every row it
	// reads, and sq[j] = ‖x_j − mu‖²; both nil elsewhere. stale: the
	// images were reloaded since they were computed (centring holds
	// ensureCentred's lock).
	mu       []float32
	sq       []float64
	centring sync.Mutex
	stale    bool
	// batch: images [0, batch) are a batch and the others column images
	// (SetBatch); 0: one set of images.
	batch int
	id    uint64
	// packChecked: the images were not scanned for NaN and ±Inf up front
	// (NewPairDataPacked); the packed matrix product checks each block's
	// rows as it packs them, and bad holds the first block's error.
	packChecked bool
	bad         atomic.Pointer[error]
}

// NewPairDataU8 wraps 8-bit images x (length n·d) for the built-in
// metrics, computed exactly in integers, the results in dtype. For
// cosine it rejects an all-zero image.
func NewPairDataU8(x []uint8, n, d int, metric Metric, dtype tensor.Dtype) (*PairData, error) {
	if n < 1 || d < 1 || len(x) != n*d {
		return nil, fmt.Errorf("%w: need N ≥ 1 images of D ≥ 1 values, got N = %d, D = %d, %d values", ErrPairInput, n, d, len(x))
	}
	p := &PairData{N: n, D: d, Dtype: dtype, U8: cpukern.NewU8Rows(x, n, d), id: ops.NewTableID()}
	if metric == MetricCosine {
		for i, q := range p.U8.SumSq {
			if q == 0 {
				return nil, fmt.Errorf("%w: image %d is all zeros: its cosine affinity is undefined", ErrPairInput, i)
			}
		}
	}
	return p, nil
}

// NewPairData wraps x (float32 or float64, length n·d) for metric. It
// rejects NaN and Inf, and for cosine an all-zero image, naming the image.
// For float32 l2 where the packed matrix product runs (cpukern.GEMM) it
// also computes the images' mean and their norms about it (centre).
func NewPairData[T float32 | float64](x []T, n, d int, metric Metric) (*PairData, error) {
	if n < 1 || d < 1 || len(x) != n*d {
		return nil, fmt.Errorf("%w: need N ≥ 1 images of D ≥ 1 values, got N = %d, D = %d, %d values", ErrPairInput, n, d, len(x))
	}
	p := &PairData{N: n, D: d, id: ops.NewTableID()}
	switch v := any(x).(type) {
	case []float32:
		p.X32, p.Dtype = v, tensor.Float32
	case []float64:
		p.X64, p.Dtype = v, tensor.Float64
	}
	switch metric {
	case MetricL2:
		if p.X32 != nil && cpukern.GEMM() {
			p.mu, p.sq = make([]float32, d), make([]float64, n)
			if err := p.centre(); err != nil { // the check too
				return nil, err
			}
			return p, nil
		}
	case MetricCosine:
		p.norm = make([]float64, n)
	}
	if err := scan(p, x, 0); err != nil {
		return nil, err
	}
	return p, nil
}

// centre sets mu to the mean of all N images and sq[j] to ‖x_j − mu‖²
// (centredSq), for float32 l2 on the packed matrix product: −‖x_i − x_j‖²
// is −(sq[i] + sq[j] − 2·(x_i − mu)·(x_j − mu)), every distance unchanged
// by the common shift, but the products are of values the size of the
// images' spread about their mean, not of their offset, whose digits
// float32 would lose in the difference.
//
// mu_k is column k's mean, summed in float64 over the images in order
// (whatever the cores: every process holding the same images, a shard's
// included, has the same mu, bit for bit; with SetBatch, the batch's sum
// and the columns' added), rounded to float32; for a
// column of whole numbers, to the nearest whole number, so that x − mu is
// exact: images of whole numbers keep exact sums wherever they had them
// unshifted, and more often, the shifted values being smaller.
//
// It checks the images too: an error names the first NaN or ±Inf.
func (p *PairData) centre() error {
	n, d, x := p.N, p.D, p.X32
	sum := make([]float64, d)
	whole := make([]bool, d)
	// Columns in ranges of at least 256 and of 2^18 values, so that small
	// images take one core rather than wait to wake others.
	parallel.For(d, max(256, (1<<18)/n), func(lo, hi int) {
		frac := make([]uint64, hi-lo)          // 0 while the column's values are whole
		some := true                           // some column may still be whole
		add := func(s []float64, r0, r1 int) { // rows [r0, r1) into s
			for i := r0; i < r1; i++ {
				row := x[i*d+lo : i*d+hi]
				s := s[:len(row)]
				if !some { // most often from the second image on, for fractions
					for k, v := range row {
						s[k] += float64(v)
					}
					continue
				}
				frac := frac[:len(row)]
				for k, v := range row {
					f := float64(v)
					s[k] += f
					frac[k] |= math.Float64bits(f + roundMagic - roundMagic - f)
				}
				if i%8 == 0 {
					some = slices.Contains(frac, 0)
				}
			}
		}
		if b := p.batch; b > 0 && b < n { // the batch's sum, then the columns'
			cols := make([]float64, hi-lo)
			add(sum[lo:hi], 0, b)
			add(cols, b, n)
			for k, c := range cols {
				sum[lo+k] += c
			}
		} else {
			add(sum[lo:hi], 0, n)
		}
		for k, f := range frac {
			whole[lo+k] = f == 0
		}
	})
	for k, s := range sum {
		if math.IsNaN(s) || math.IsInf(s, 0) { // a NaN or ±Inf in column k
			if err := scan(p, x, 0); err != nil {
				return err
			}
		}
		mean := s / float64(n)
		if whole[k] {
			mean = math.Round(mean)
		}
		p.mu[k] = float32(mean)
	}
	parallel.For(n, max(64, (1<<18)/d), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p.sq[i] = centredSq(x[i*d:(i+1)*d], p.mu)
		}
	})
	p.stale = false
	return nil
}

// SetBatch says images [0, n) are a batch and the others column images
// compared against it (a compiled affinity with column images). The mean
// centre takes for float32 l2 is then the batch's sum and the columns'
// sum, each in order, added, over N: column images that repeat the batch
// double its sum exactly, so the mean, and every pair, are those of the
// batch alone, bit for bit.
func (p *PairData) SetBatch(n int) {
	if n < 0 || n > p.N {
		panic("pairwise: SetBatch outside [0, N]")
	}
	p.centring.Lock()
	defer p.centring.Unlock()
	p.batch, p.stale = n, p.mu != nil
}

// roundMagic, added to and taken from a float64 below 2^51 in size,
// rounds it to a whole number: f is whole where that leaves it as it was
// (values above 2^51, all whole, may be taken for fractions: their mean is
// then not rounded, at no cost to accuracy).
const roundMagic = 0x1.8p52

// centredSq is ‖row − mu‖², each value row_k − mu_k rounded to float32 as
// the packed matrix product packs it (cpukern.DotPack.SetShift), squared
// and summed in float64, in four sums (k mod 4) added at the end.
func centredSq(row, mu []float32) float64 {
	var s0, s1, s2, s3 float64
	mu = mu[:len(row)]
	k := 0
	for ; k+4 <= len(row); k += 4 {
		c0, c1 := float64(row[k]-mu[k]), float64(row[k+1]-mu[k+1])
		c2, c3 := float64(row[k+2]-mu[k+2]), float64(row[k+3]-mu[k+3])
		s0 += c0 * c0
		s1 += c1 * c1
		s2 += c2 * c2
		s3 += c3 * c3
	}
	for ; k < len(row); k++ {
		c := float64(row[k] - mu[k])
		s0 += c * c
	}
	return (s0 + s1) + (s2 + s3)
}

// ensureCentred recomputes mu and sq where the images were reloaded since
// (ReloadRows leaves that to the first block after it, so that a caller
// replacing the images in parts pays once).
func (p *PairData) ensureCentred() {
	if p.mu == nil {
		return
	}
	p.centring.Lock()
	defer p.centring.Unlock()
	if p.stale {
		p.centre() // checked as they were reloaded: no error
	}
}

// NewPairDataPacked wraps float32 images x (length n·d) for dot products
// without scanning them for NaN and ±Inf first: where the packed matrix
// product runs (cpukern.GEMM), it checks the values of each block's rows
// as it packs them, one pass over the images fewer, and Err then names the
// first image holding one, as NewPairData would. This needs every image
// to be a row of some block of the run (all N rows computed by Pairwise's
// dot products on the CPU); ok is false, and nothing is returned, where
// the packed matrix product does not run.
func NewPairDataPacked(x []float32, n, d int) (p *PairData, ok bool, err error) {
	if !cpukern.GEMM() {
		return nil, false, nil
	}
	if n < 1 || d < 1 || len(x) != n*d {
		return nil, false, fmt.Errorf("%w: need N ≥ 1 images of D ≥ 1 values, got N = %d, D = %d, %d values", ErrPairInput, n, d, len(x))
	}
	return &PairData{N: n, D: d, X32: x, Dtype: tensor.Float32, id: ops.NewTableID(), packChecked: true}, true, nil
}

// PackChecked reports whether the images are checked for NaN and ±Inf as
// blocks pack them (NewPairDataPacked) rather than up front.
func (p *PairData) PackChecked() bool { return p.packChecked }

// Err is, for images checked as they are packed, the error naming the
// first NaN or ±Inf of the first block whose rows held one; nil while none
// was found, and always for images checked up front.
func (p *PairData) Err() error {
	if e := p.bad.Load(); e != nil {
		return *e
	}
	return nil
}

// packedNonFinite records that rows [lo, lo+m), packed, hold a NaN or
// ±Inf: the first one's error, found by scanning them, becomes Err unless
// an earlier block's is there.
func (p *PairData) packedNonFinite(lo, m int) {
	err := scan(p, p.X32[lo*p.D:(lo+m)*p.D], lo)
	if err == nil {
		err = fmt.Errorf("%w: images %d to %d hold a value that is not finite", ErrPairInput, lo, lo+m-1)
	}
	p.bad.CompareAndSwap(nil, &err)
}

// Bytes is the process memory the images take (none for mapped images).
func (p *PairData) Bytes() int64 {
	b := int64(8*len(p.norm) + 8*len(p.sq) + 4*len(p.mu))
	if !p.Mapped {
		b += int64(4*len(p.X32) + 8*len(p.X64))
	}
	if p.U8 != nil {
		b += int64(len(p.U8.X)) + 16*int64(p.N)
	}
	return b
}
