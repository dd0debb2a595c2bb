package formula

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// CUDA C from a formula's graph: three kinds of kernel, each one thread
// (or a group of 32 threads) per result, written so that a GPU computes
// what the evaluator of package cpukern computes in float32.
//
//   - CUDAPair: the affinity's per-pair program, one thread per pair of
//     a block of rows and the images, the rows' and the images' values
//     staged in shared memory 32 at a time;
//   - CUDAMap: elementwise over n values (DRR's --post), one thread per
//     value.
//
// As in the evaluator, values along the vector axis are float32, numbers
// (row values, reductions, what is computed from them) float64, and a
// number used along the vector axis is rounded to float32 first. Every
// reduction accumulates in float64. A formula whose reductions are nested
// (a reduction inside another's argument, as mean(abs(a - mean(a - b))))
// runs as sequential passes over the vector axis in the same thread, as
// the evaluator runs it as sequential blocks. The operations are those of
// Apply: comparisons give 1 or 0; min(x, y) is y when y < x, else x (and
// max likewise), so a NaN second argument is passed over and a NaN first
// one kept; where(c, x, y) is x when c ≠ 0 (NaN included). A reduction
// max or min passes over NaN elements. Numbers are written exactly, as
// hexadecimal floating-point literals. The source is compiled with the
// default floating-point options (no fast math) and should be compiled
// with --fmad=false, so that a*b + c is rounded twice, as on the CPU.

// ErrNoKernel is wrapped by the errors of a formula the emitter cannot
// write a GPU kernel for; the caller then keeps the CPU evaluator.
var ErrNoKernel = errors.New("formula: no GPU kernel")

// CUDAKernel is one kernel of CUDA C made from a formula.
type CUDAKernel struct {
	// Name is the kernel's entry point: tl_fx_<kind>_<hash of the
	// source>, so that kernels of different formulas never share a name.
	Name string
	// Src is the CUDA C source: self-contained (no #include), the kernel
	// declared extern "C".
	Src string
	// Params are the kernel's parameters, in order; each is 8 bytes wide
	// (a pointer, a long long or a double).
	Params []CUDAParam
	// Block is the number of threads per block the kernel is written for.
	Block int
	// PerBlock is the number of results (pairs of a row, queries, values)
	// along the grid's x axis one block computes, and RowsPerBlock, for
	// CUDAPair, the rows along its y axis.
	PerBlock, RowsPerBlock int
}

// CUDAParam is a kernel parameter: its name and C type.
type CUDAParam struct{ Name, Type string }

// CUDAOptions are the NVRTC options the kernels are meant for: IEEE
// rounding of every operation (no contraction into fused multiply-adds,
// no fast math), and C++17 (for hexadecimal floating-point literals;
// NVRTC 11 defaults to C++14).
var CUDAOptions = []string{"--fmad=false", "--std=c++17"}

const (
	pairTJ    = 32  // columns per block of the pair kernel
	pairTI    = 8   // rows per block
	pairKC    = 32  // elements staged per step
	cudaBlock = 256 // threads per block of every kernel
)

// cudaPrelude opens every source: the constants and helpers, guarded so
// that several kernels' sources may be concatenated.
const cudaPrelude = `#ifndef TL_FX_PRELUDE
#define TL_FX_PRELUDE
#ifdef __CUDACC__
#define TL_FX_INF __longlong_as_double(0x7ff0000000000000LL)
#define TL_FX_NAN __longlong_as_double(0x7ff8000000000000LL)
#else // compiled for the CPU, under the CUDA emulator (internal/kernelemu)
#define TL_FX_INF __builtin_inf()
#define TL_FX_NAN __builtin_nan("")
#endif
// tl_fx_mod, tl_fx_modf: NumPy's mod (Python's %), the sign of b.
static __device__ inline double tl_fx_mod(double a, double b) {
  double m = fmod(a, b);
  if (b == 0) return m;
  if (m == 0) return copysign(0.0, b);
  if ((b < 0) != (m < 0)) m += b;
  return m;
}
static __device__ inline float tl_fx_modf(float a, float b) {
  float m = fmodf(a, b);
  if (b == 0) return m;
  if (m == 0) return copysignf(0.0f, b);
  if ((b < 0) != (m < 0)) m += b;
  return m;
}
#endif
`

// kernelGen writes one kernel's body from a graph.
type kernelGen struct {
	g        *Graph
	live     []*Node
	level    map[*Node]int
	byLevel  [][]*Node // live's nodes by level
	maxLevel int
	vecIn    map[int]string // vector variable → its element, a float expression
	scalIn   map[int]string // scalar variable → a double expression
	w        strings.Builder
}

func newKernelGen(g *Graph, inputs []int) (*kernelGen, error) {
	for _, n := range g.Nodes {
		if n.Op.IsHistogram() {
			return nil, fmt.Errorf("%w: hist and hist2 are computed on the CPU only; run this formula without --device cuda", ErrNoKernel)
		}
	}
	k := &kernelGen{g: g, live: reachable(g.Root), vecIn: map[int]string{}, scalIn: map[int]string{}}
	given := map[int]bool{}
	for _, v := range inputs {
		if v < 0 || v >= len(g.Vars) {
			return nil, fmt.Errorf("formula: input %d is not a variable of the graph", v)
		}
		given[v] = true
	}
	for _, n := range k.live {
		if n.Op == OpVar && !given[n.Var] {
			return nil, fmt.Errorf("formula: variable %s is not an input of the kernel", g.Vars[n.Var].Name)
		}
	}
	k.level, k.byLevel = levels(k.live)
	k.maxLevel = len(k.byLevel) - 1
	return k, nil
}

func (k *kernelGen) line(indent int, format string, args ...any) {
	k.w.WriteString(strings.Repeat("  ", indent))
	fmt.Fprintf(&k.w, format, args...)
	k.w.WriteByte('\n')
}

// cLit writes v exactly, as a double.
func cLit(v float64) string {
	switch {
	case math.IsNaN(v):
		return "TL_FX_NAN"
	case math.IsInf(v, 1):
		return "TL_FX_INF"
	case math.IsInf(v, -1):
		return "(-TL_FX_INF)"
	}
	return "(" + strconv.FormatFloat(v, 'x', -1, 64) + ")"
}

// scalar is the double expression of a number node (not along the
// vector axis).
func (k *kernelGen) scalar(n *Node) string {
	switch {
	case n.Op == OpConst:
		return cLit(n.Val)
	case n.Op == OpVar:
		return k.scalIn[n.Var]
	case n.Op.IsReduction():
		return fmt.Sprintf("r_%d", n.id)
	}
	return fmt.Sprintf("s_%d", n.id)
}

// elem is the float expression of a node inside a pass.
func (k *kernelGen) elem(n *Node) string {
	if n.Vec {
		return fmt.Sprintf("v_%d", n.id)
	}
	return "(float)" + k.scalar(n)
}

// expr writes operation o of args (already expressions) in float (f32)
// or double, from the table's CUDA code.
func expr(o Op, f32 bool, args ...string) string {
	if opTable[o].Kind != Elementwise {
		panic("formula: no CUDA expression for " + o.String())
	}
	return expand(o, opTable[o].CUDA, f32, args, "")
}

// expand writes the CUDA code tmpl of operation o: $x, $y, $z become the
// arguments args, $r the accumulator acc, $0 and $1 zero and one in float
// (f32) or double, $f the suffix of a float libm function.
func expand(o Op, tmpl string, f32 bool, args []string, acc string) string {
	zero, one, suffix := "0.0", "1.0", ""
	if f32 {
		zero, one, suffix = "0.0f", "1.0f", "f"
	}
	var sb strings.Builder
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '$' || i+1 == len(tmpl) {
			sb.WriteByte(tmpl[i])
			continue
		}
		i++
		switch c := tmpl[i]; {
		case c >= 'x' && c <= 'z' && int(c-'x') < len(args):
			sb.WriteString(args[c-'x'])
		case c == 'r' && acc != "":
			sb.WriteString(acc)
		case c == '0':
			sb.WriteString(zero)
		case c == '1':
			sb.WriteString(one)
		case c == 'f':
			sb.WriteString(suffix)
		default:
			panic("formula: bad CUDA code for " + o.String())
		}
	}
	return sb.String()
}

// scalars writes the numbers of level l that are neither constants,
// variables nor reductions.
func (k *kernelGen) scalars(l, indent int) {
	if l >= len(k.byLevel) {
		return
	}
	for _, n := range k.byLevel[l] {
		if n.Vec || n.Op.IsReduction() || n.Op == OpConst || n.Op == OpVar {
			continue
		}
		args := make([]string, len(n.Args))
		for i, a := range n.Args {
			args[i] = k.scalar(a)
		}
		k.line(indent, "const double s_%d = %s;", n.id, expr(n.Op, false, args...))
	}
}

// reductions lists the reductions of level l.
func (k *kernelGen) reductions(l int) []*Node {
	var out []*Node
	if l >= len(k.byLevel) {
		return nil
	}
	for _, n := range k.byLevel[l] {
		if n.Op.IsReduction() {
			out = append(out, n)
		}
	}
	return out
}

// initAcc declares the accumulators of roots.
func (k *kernelGen) initAcc(roots []*Node, indent int) {
	for _, r := range roots {
		k.line(indent, "double r_%d = %s;", r.id, opTable[r.Op].CUDAInit)
	}
}

// body writes one element of a pass: the vector nodes roots (and store,
// when not nil) need, then each root's accumulation. It returns store's
// float expression.
func (k *kernelGen) body(roots []*Node, store *Node, indent int) string {
	var tops []*Node // the vector nodes the pass computes, with what they read
	for _, r := range roots {
		if r.Args[0].Vec {
			tops = append(tops, r.Args[0])
		}
	}
	if store != nil && store.Vec {
		tops = append(tops, store)
	}
	for _, n := range passNodes(tops) {
		if n.Op == OpVar {
			k.line(indent, "const float v_%d = %s;", n.id, k.vecIn[n.Var])
			continue
		}
		args := make([]string, len(n.Args))
		for i, a := range n.Args {
			args[i] = k.elem(a)
		}
		k.line(indent, "const float v_%d = %s;", n.id, expr(n.Op, true, args...))
	}
	for _, r := range roots {
		x := "(double)" + k.elem(r.Args[0])
		k.line(indent, "%s", expand(r.Op, opTable[r.Op].CUDA, false, []string{x}, fmt.Sprintf("r_%d", r.id)))
	}
	if store == nil {
		return ""
	}
	return k.elem(store)
}

// finishKernel names the kernel by the hash of its source and returns it.
func finishKernel(kind, src string, params []CUDAParam, perBlock, rows int) *CUDAKernel {
	const placeholder = "TL_FX_KERNEL_NAME"
	sum := sha256.Sum256([]byte(src))
	name := "tl_fx_" + kind + "_" + hex.EncodeToString(sum[:8])
	return &CUDAKernel{Name: name, Src: strings.ReplaceAll(src, placeholder, name), Params: params, Block: cudaBlock,
		PerBlock: perBlock, RowsPerBlock: rows}
}

func cSignature(params []CUDAParam) string {
	var parts []string
	for _, p := range params {
		parts = append(parts, p.Type+" "+p.Name)
	}
	return strings.Join(parts, ", ")
}

// CUDAPair writes the affinity's per-pair kernel for the graph g of a
// PairPlan's Pair program (PairPlan.PairGraph), inputs ordered as
// PairPlan.PairInputs: the images a and b, then the row values of a, then
// those of b. Its parameters:
//
//	const float *a      the block's m rows, row-major (m, d)
//	const float *b      the n images, row-major (n, d)
//	const double *ra    the rows' values, row-major (m, nrow)
//	const double *rb    the images' values, row-major (n, nrow)
//	float *out          out[i·ldo + j] = f(row i, image j)
//	long long m, n, d, ldo
//
// Launch it over ⌈n/PerBlock⌉ × ⌈m/RowsPerBlock⌉ blocks of Block threads.
func CUDAPair(g *Graph, inputs []int) (*CUDAKernel, error) {
	k, err := newKernelGen(g, inputs)
	if err != nil {
		return nil, err
	}
	var vec, scal []int
	for _, v := range inputs {
		if g.Vars[v].Vector {
			vec = append(vec, v)
		} else {
			scal = append(scal, v)
		}
	}
	if len(vec) != 2 || len(scal)%2 != 0 {
		return nil, fmt.Errorf("formula: a pair kernel takes two images and as many values of each, got %d vectors and %d numbers",
			len(vec), len(scal))
	}
	if g.Root.Vec {
		return nil, fmt.Errorf("%w: the formula gives a vector, not one number per pair", ErrNoKernel)
	}
	nr := len(scal) / 2
	k.vecIn[vec[0]] = "sA[ti][kk]"
	k.vecIn[vec[1]] = "sB[tj][kk]"
	for r, v := range scal {
		if r < nr {
			k.scalIn[v] = fmt.Sprintf("ra[ic * %d + %d]", nr, r)
		} else {
			k.scalIn[v] = fmt.Sprintf("rb[jc * %d + %d]", nr, r-nr)
		}
	}
	params := []CUDAParam{{"a", "const float *"}, {"b", "const float *"}, {"ra", "const double *"}, {"rb", "const double *"},
		{"out", "float *"}, {"m", "long long"}, {"n", "long long"}, {"d", "long long"}, {"ldo", "long long"}}
	k.w.WriteString(cudaPrelude)
	k.line(0, "// One thread per pair (i, j): %d columns j by %d rows i per block of %d threads; the", pairTJ, pairTI, cudaBlock)
	k.line(0, "// rows' and the columns' elements staged in shared memory %d at a time.", pairKC)
	k.line(0, `extern "C" __global__ void __launch_bounds__(%d) TL_FX_KERNEL_NAME(%s) {`, cudaBlock, cSignature(params))
	k.line(1, "__shared__ float sA[%d][%d], sB[%d][%d];", pairTI, pairKC+1, pairTJ, pairKC+1)
	k.line(1, "const int tj = threadIdx.x %% %d, ti = threadIdx.x / %d;", pairTJ, pairTJ)
	k.line(1, "const long long i0 = (long long)blockIdx.y * %d, j0 = (long long)blockIdx.x * %d;", pairTI, pairTJ)
	k.line(1, "const long long i = i0 + ti, j = j0 + tj;")
	k.line(1, "const long long ic = i < m ? i : m - 1, jc = j < n ? j : n - 1; // in bounds for the row values")
	k.line(1, "(void)ic;")
	k.line(1, "(void)jc;")
	k.scalars(0, 1)
	for l := 1; l <= k.maxLevel; l++ {
		roots := k.reductions(l)
		if len(roots) > 0 {
			k.line(1, "// pass %d over the elements", l)
			k.initAcc(roots, 1)
			k.line(1, "for (long long k0 = 0; k0 < d; k0 += %d) {", pairKC)
			k.line(2, "for (int e = threadIdx.x; e < %d; e += %d) {", pairTJ*pairKC, cudaBlock)
			k.line(3, "const int c = e / %d, kk = e %% %d;", pairKC, pairKC)
			k.line(3, "const long long gj = j0 + c, gk = k0 + kk;")
			k.line(3, "sB[c][kk] = gj < n && gk < d ? b[gj * d + gk] : 0.0f;")
			k.line(3, "if (e < %d) {", pairTI*pairKC)
			k.line(4, "const long long gi = i0 + c;")
			k.line(4, "sA[c][kk] = gi < m && gk < d ? a[gi * d + gk] : 0.0f;")
			k.line(3, "}")
			k.line(2, "}")
			k.line(2, "__syncthreads();")
			k.line(2, "const int kn = d - k0 < %d ? (int)(d - k0) : %d;", pairKC, pairKC)
			k.line(2, "for (int kk = 0; kk < kn; kk++) {")
			k.body(roots, nil, 3)
			k.line(2, "}")
			k.line(2, "__syncthreads();")
			k.line(1, "}")
		}
		k.scalars(l, 1)
	}
	k.line(1, "if (i < m && j < n) out[i * ldo + j] = (float)%s;", k.scalar(g.Root))
	k.line(0, "}")
	return finishKernel("pair", k.w.String(), params, pairTJ, pairTI), nil
}

// CUDAMap writes an elementwise kernel for g, a graph without reductions
// (one that reduces over the whole array is refused, with ErrNoKernel).
// Its parameters: one const float * per vector input (in inputs' order),
// one double per scalar input, then float *out and long long n: out[k] =
// f(in0[k], …) for k < n. Launch it over any number of blocks of Block
// threads (it strides over the grid).
func CUDAMap(g *Graph, inputs []int) (*CUDAKernel, error) {
	k, err := newKernelGen(g, inputs)
	if err != nil {
		return nil, err
	}
	if k.maxLevel > 0 {
		return nil, fmt.Errorf("%w: the formula reduces over the whole array (sum, mean, max, min, dot or norm)", ErrNoKernel)
	}
	var params []CUDAParam
	for _, v := range inputs {
		name := fmt.Sprintf("in%d", len(params))
		if g.Vars[v].Vector {
			params = append(params, CUDAParam{name, "const float *"})
			k.vecIn[v] = name + "[k]"
		} else {
			params = append(params, CUDAParam{name, "double"})
			k.scalIn[v] = name
		}
	}
	params = append(params, CUDAParam{"out", "float *"}, CUDAParam{"n", "long long"})
	k.w.WriteString(cudaPrelude)
	k.line(0, "// One thread per element, striding over the grid.")
	k.line(0, `extern "C" __global__ void __launch_bounds__(%d) TL_FX_KERNEL_NAME(%s) {`, cudaBlock, cSignature(params))
	k.scalars(0, 1)
	k.line(1, "for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {")
	res := k.body(nil, g.Root, 2)
	k.line(2, "out[k] = %s;", res)
	k.line(1, "}")
	k.line(0, "}")
	return finishKernel("map", k.w.String(), params, cudaBlock, 1), nil
}

// CUDAPair writes the plan's per-pair kernel (see the function CUDAPair);
// a plan rewritten over dot products has none.
func (p *PairPlan) CUDAPair() (*CUDAKernel, error) {
	if p.PairGraph == nil {
		return nil, fmt.Errorf("%w: the formula is computed from dot products, not per pair", ErrNoKernel)
	}
	return CUDAPair(p.PairGraph, p.PairInputs)
}
