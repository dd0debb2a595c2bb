package cpukern

// #include <stdlib.h>
// #include "formula.h"
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// FxOp is an instruction of the formula evaluator (formula.h).
type FxOp int32

// The evaluator's instructions past the formula operations'
// (formula_ops.go: the elementwise ones apply to vector slots in a vector
// block and to registers in a scalar block; the reductions fold slot A
// into register Dst).
const (
	FxAbsDiff FxOp = fxOpsEnd + iota // |A − B|
	FxSqDiff                         // (A − B)²
	FxRSumOp                         // fold op C (an operation that folds, FxAbsDiff, FxSqDiff) of A and B into register Dst
	// In a scalar block: the next instruction runs bin by bin over Dst
	// registers in a row from each operand whose bit is set in A (1: A,
	// 2: B, 4: C) and from its Dst; a reduction so prefixed folds
	// registers A … A+Dst−1 into its Dst. FxHist and FxHist2 (in a vector
	// block) count slot A, or the pairs of slots A and B, into registers
	// Dst on, over the range and bins per axis in registers C, C+1, C+2.
	FxBins
)

// Prologue and output instructions of a vector block.
const (
	FxBcast    FxOp = 64 + iota // fill slot Dst with register A
	FxInitSum                   // register Dst = 0
	FxInitMax                   // −∞
	FxInitMin                   // +∞
	FxStore                     // write slot A to output Dst
	FxInitHist                  // registers Dst … Dst+A−1 = 0
)

// The Go and C numbers of the instructions agree (an index out of range
// fails the build).
var _ = [1]int{}[fxOpsEnd-C.TL_FX_OPS_END+FxRSumOp-C.TL_FX_RSUMOP+FxStore-C.TL_FX_STORE+FxBins-C.TL_FX_BINS+FxInitHist-C.TL_FX_RINIT_HIST]
var _ = [1]int{}[C.TL_FX_OPS_END-fxOpsEnd+C.TL_FX_RSUMOP-FxRSumOp+C.TL_FX_STORE-FxStore+C.TL_FX_BINS-FxBins+C.TL_FX_RINIT_HIST-FxInitHist]

// FxChunk is the evaluator's chunk length in elements.
const FxChunk = C.TL_FX_CHUNK

// FxIns is one instruction.
type FxIns struct {
	Op           FxOp
	Dst, A, B, C int32
}

// FxBlock is a run of instructions: scalar (Body once, over registers) or
// vector (Prologue once, then Body over every chunk of the vector axis).
type FxBlock struct {
	Vector         bool
	Prologue, Body []FxIns
}

// FxProgram is a compiled formula for the evaluator. Vector slots
// 0 … Inputs−1 are the inputs; registers hold the scalar values, Regs
// their initial values (constants; inputs are set per evaluation).
type FxProgram struct {
	Blocks  []FxBlock
	Inputs  int // vector inputs
	Slots   int // vector slots, inputs included
	Regs    []float64
	Result  int32 // the register of a reducing program's result
	Outputs int   // vector outputs

	once sync.Once
	c    *C.tl_fx_prog
}

// prog returns the program in C memory, made on first use (by whichever
// goroutine gets there first).
func (p *FxProgram) prog() *C.tl_fx_prog {
	p.once.Do(p.toC)
	return p.c
}

// toC copies the program into C memory, freed with the program.
func (p *FxProgram) toC() {
	var ins []FxIns
	var blocks []int32
	for _, b := range p.Blocks {
		v := int32(0)
		if b.Vector {
			v = 1
		}
		p0 := int32(len(ins))
		ins = append(ins, b.Prologue...)
		b0 := int32(len(ins))
		ins = append(ins, b.Body...)
		blocks = append(blocks, v, p0, b0, b0, int32(len(ins)))
	}
	for q, x := range ins {
		regs := []int32{x.Dst, x.A, x.B, x.C}
		span := [4]int32{1, 1, 1, 1} // registers read or written in a row from each
		switch x.Op {
		case FxRSumOp:
			regs = regs[:3] // C is the operation folded
		case FxBins:
			if q+1 == len(ins) || x.Dst < 1 {
				panic(fmt.Sprintf("cpukern: formula instruction %+v without its instruction", x))
			}
			regs = regs[:0] // its own are a count and a mask
		case FxInitHist:
			regs, span[0] = regs[:1], max(x.A, 1)
		case FxHist, FxHist2:
			span[3] = 3
		}
		if q > 0 && ins[q-1].Op == FxBins {
			bins := ins[q-1]
			if x.Op >= FxRSum && x.Op <= FxRMin {
				span[1] = bins.Dst
			} else {
				span[0] = bins.Dst
				for k := range 3 {
					if bins.A&(1<<k) != 0 {
						span[k+1] = bins.Dst
					}
				}
			}
		}
		for k, r := range regs {
			if r < 0 || int(r)+int(span[k]) > max(p.Slots, len(p.Regs), p.Outputs) {
				panic(fmt.Sprintf("cpukern: formula instruction %+v out of range", x))
			}
		}
		if x.Op == FxHist || x.Op == FxHist2 {
			n := p.Regs[x.C+2]
			cells := n
			if x.Op == FxHist2 {
				cells = n * n
			}
			if !(n >= 1) || float64(x.Dst)+cells > float64(len(p.Regs)) {
				panic(fmt.Sprintf("cpukern: formula histogram %+v of %v bins out of range", x, n))
			}
		}
	}
	c := (*C.tl_fx_prog)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tl_fx_prog{}))))
	c.nblocks = C.int32_t(len(p.Blocks))
	c.blocks = (*C.int32_t)(cCopy(blocks))
	c.ins = (*C.tl_fx_ins)(cCopy(ins))
	c.nin, c.nslot, c.nreg, c.result = C.int32_t(p.Inputs), C.int32_t(p.Slots), C.int32_t(len(p.Regs)), C.int32_t(p.Result)
	p.c = c
	runtime.AddCleanup(p, func(c *C.tl_fx_prog) {
		C.free(unsafe.Pointer(c.blocks))
		C.free(unsafe.Pointer(c.ins))
		C.free(unsafe.Pointer(c))
	}, c)
}

func cCopy[E any](s []E) unsafe.Pointer {
	var e E
	n := len(s) * int(unsafe.Sizeof(e))
	m := C.malloc(C.size_t(max(n, 1)))
	if n > 0 {
		copy(unsafe.Slice((*byte)(m), n), unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), n))
	}
	return m
}

// FxState is one goroutine's working memory for a program: registers and
// chunk slots. It must not be shared between goroutines.
type FxState[T float32 | float64] struct {
	p       *FxProgram
	Regs    []float64
	scratch []T
	vbuf    []T
	// The inputs' and outputs' addresses, for C, in C memory: only the
	// arrays they point into are pinned, and a Pinner holds five objects
	// without allocating.
	ip, op []unsafe.Pointer
}

// NewFxState makes working memory for p.
func NewFxState[T float32 | float64](p *FxProgram) *FxState[T] {
	p.prog()
	s := &FxState[T]{p: p, Regs: make([]float64, max(len(p.Regs), 1))}
	copy(s.Regs, p.Regs)
	s.scratch = make([]T, max(p.Slots, 1)*FxChunk)
	ni, no := max(p.Inputs, 1), max(p.Outputs, 1)
	ptrs := C.calloc(C.size_t(ni+no), C.size_t(unsafe.Sizeof(unsafe.Pointer(nil))))
	all := unsafe.Slice((*unsafe.Pointer)(ptrs), ni+no)
	s.ip, s.op = all[:ni:ni], all[ni:]
	runtime.AddCleanup(s, func(p unsafe.Pointer) { C.free(p) }, ptrs)
	return s
}

// Reset sets the registers to their initial values.
func (s *FxState[T]) Reset() { copy(s.Regs, s.p.Regs) }

// Run evaluates the program over n elements of the inputs (each at least
// n long, or one value: the same for every element, for any of the first
// 64 inputs), writing its outputs (each at least n long). The registers keep
// what the program left (a reducing program's result in Result).
func (s *FxState[T]) Run(n int, in, out [][]T) {
	p := s.p
	if len(in) != p.Inputs || len(out) != p.Outputs {
		panic(fmt.Sprintf("cpukern: formula with %d inputs and %d outputs run with %d and %d", p.Inputs, p.Outputs, len(in), len(out)))
	}
	if n < 0 {
		panic("cpukern: formula run over a negative length")
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	ip, op := s.ip, s.op
	var bcast uint64
	for i, x := range in {
		if len(x) == 1 && n > 1 && i < 64 {
			bcast |= 1 << i
		} else if len(x) < n {
			panic("cpukern: formula input shorter than n")
		}
		if len(x) > 0 {
			pin.Pin(&x[0])
			ip[i] = unsafe.Pointer(&x[0])
		}
	}
	for i, x := range out {
		if len(x) < n {
			panic("cpukern: formula output shorter than n")
		}
		if len(x) > 0 {
			pin.Pin(&x[0])
			op[i] = unsafe.Pointer(&x[0])
		}
	}
	switch sc := any(s.scratch).(type) {
	case []float32:
		C.tl_fx_run_f32(p.prog(), C.int64_t(n), (**C.float)(unsafe.Pointer(&ip[0])), (**C.float)(unsafe.Pointer(&op[0])),
			(*C.double)(&s.Regs[0]), (*C.float)(&sc[0]), C.uint64_t(bcast))
	case []float64:
		C.tl_fx_run_f64(p.prog(), C.int64_t(n), (**C.double)(unsafe.Pointer(&ip[0])), (**C.double)(unsafe.Pointer(&op[0])),
			(*C.double)(&s.Regs[0]), (*C.double)(&sc[0]), C.uint64_t(bcast))
	}
}

// Pairs sets out[i·ldo+j] to the program over rows a[i·lda:] and
// b[j·ldb:] (d elements each), i < m, j < n, with registers 0 … nr−1 set
// from ra[i·nr:] and nr … 2nr−1 from rb[j·nr:].
func (s *FxState[T]) Pairs(m, n, d int, a []T, lda int, b []T, ldb int, out []T, ldo int, ra, rb []float64, nr int) {
	checkDims(m, n, d, len(a), lda, len(b), ldb, len(out), ldo)
	if m == 0 || n == 0 {
		return
	}
	if s.p.Inputs != 2 || len(ra) < m*nr || len(rb) < n*nr || len(s.Regs) < 2*nr {
		panic("cpukern: formula pairs with mismatched inputs or row values")
	}
	var rap, rbp *C.double
	if nr > 0 {
		rap, rbp = (*C.double)(&ra[0]), (*C.double)(&rb[0])
	}
	switch sc := any(s.scratch).(type) {
	case []float32:
		a, b, out := any(a).([]float32), any(b).([]float32), any(out).([]float32)
		C.tl_fx_pairs_f32(s.p.prog(), C.int64_t(m), C.int64_t(n), C.int64_t(d), (*C.float)(&a[0]), C.int64_t(lda),
			(*C.float)(&b[0]), C.int64_t(ldb), (*C.float)(&out[0]), C.int64_t(ldo), rap, rbp, C.int64_t(nr),
			(*C.double)(&s.Regs[0]), (*C.float)(&sc[0]))
	case []float64:
		a, b, out := any(a).([]float64), any(b).([]float64), any(out).([]float64)
		C.tl_fx_pairs_f64(s.p.prog(), C.int64_t(m), C.int64_t(n), C.int64_t(d), (*C.double)(&a[0]), C.int64_t(lda),
			(*C.double)(&b[0]), C.int64_t(ldb), (*C.double)(&out[0]), C.int64_t(ldo), rap, rbp, C.int64_t(nr),
			(*C.double)(&s.Regs[0]), (*C.double)(&sc[0]))
	}
}

// Interp sets out[q] to the program over the m values
// Σ_k w[4q+k]·fpT[(start[q]+k)·m:], with register 0 set to x[q].
func (s *FxState[T]) Interp(m int, start []int32, w []float64, fpT, x, out []T) {
	nq := len(x)
	if nq == 0 {
		return
	}
	if len(start) < nq || len(w) < 4*nq || len(out) < nq || s.p.Inputs != 1 {
		panic("cpukern: formula interp with short arguments")
	}
	for _, st := range start[:nq] {
		if st < 0 || (int(st)+4)*m > len(fpT) {
			panic("cpukern: formula interp start outside the table")
		}
	}
	if len(s.vbuf) < m {
		s.vbuf = make([]T, (m+FxChunk-1)/FxChunk*FxChunk)
	}
	switch sc := any(s.scratch).(type) {
	case []float32:
		fpT, x, out, vb := any(fpT).([]float32), any(x).([]float32), any(out).([]float32), any(s.vbuf).([]float32)
		C.tl_fx_interp_f32(s.p.prog(), C.int64_t(nq), C.int64_t(m), (*C.int32_t)(&start[0]), (*C.double)(&w[0]),
			(*C.float)(&fpT[0]), (*C.float)(&x[0]), (*C.float)(&out[0]), (*C.double)(&s.Regs[0]), (*C.float)(&vb[0]), (*C.float)(&sc[0]))
	case []float64:
		fpT, x, out, vb := any(fpT).([]float64), any(x).([]float64), any(out).([]float64), any(s.vbuf).([]float64)
		C.tl_fx_interp_f64(s.p.prog(), C.int64_t(nq), C.int64_t(m), (*C.int32_t)(&start[0]), (*C.double)(&w[0]),
			(*C.double)(&fpT[0]), (*C.double)(&x[0]), (*C.double)(&out[0]), (*C.double)(&s.Regs[0]), (*C.double)(&vb[0]), (*C.double)(&sc[0]))
	}
}

// Stream evaluates a reducing program of one vector input made of pieces
// of x: each is called once per pass over the vector and must call piece
// with every piece, x[lo:hi], in order. It returns the result.
func (s *FxState[T]) Stream(x []T, each func(piece func(lo, hi int))) float64 {
	p := s.p
	if p.Inputs != 1 || p.Outputs != 0 {
		panic("cpukern: formula streamed with other than one input and no output")
	}
	if len(x) == 0 {
		return math.NaN()
	}
	ip := make([]unsafe.Pointer, 1)
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&ip[0])
	pin.Pin(&x[0])
	for bi, b := range p.Blocks {
		switch sc := any(s.scratch).(type) {
		case []float32:
			C.tl_fx_stream_begin_f32(p.prog(), C.int32_t(bi), (*C.double)(&s.Regs[0]), (*C.float)(&sc[0]))
		case []float64:
			C.tl_fx_stream_begin_f64(p.prog(), C.int32_t(bi), (*C.double)(&s.Regs[0]), (*C.double)(&sc[0]))
		}
		if !b.Vector {
			continue
		}
		each(func(lo, hi int) {
			if lo < 0 || hi > len(x) || lo > hi {
				panic("cpukern: formula piece outside its vector")
			}
			if lo == hi {
				return
			}
			ip[0] = unsafe.Pointer(&x[lo])
			switch sc := any(s.scratch).(type) {
			case []float32:
				C.tl_fx_stream_feed_f32(p.prog(), C.int32_t(bi), C.int64_t(hi-lo), (**C.float)(unsafe.Pointer(&ip[0])),
					(*C.double)(&s.Regs[0]), (*C.float)(&sc[0]))
			case []float64:
				C.tl_fx_stream_feed_f64(p.prog(), C.int32_t(bi), C.int64_t(hi-lo), (**C.double)(unsafe.Pointer(&ip[0])),
					(*C.double)(&s.Regs[0]), (*C.double)(&sc[0]))
			}
		})
	}
	return s.Regs[p.Result]
}
