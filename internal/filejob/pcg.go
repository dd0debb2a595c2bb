package filejob

import "math/bits"

// pcg is the state of math/rand/v2's PCG generator: a 128-bit linear
// congruential generator s ← s·mul + inc (mod 2¹²⁸) whose outputs are its
// states scrambled by DXSM. Its outputs are those of rand.NewPCG(hi, lo)
// bit for bit; unlike rand.PCG it can jump any number of steps ahead in
// O(log steps), so that disjoint parts of one stream can be generated in
// parallel.
type pcg struct{ hi, lo uint64 }

// lcg is the affine map s ↦ s·mul + add (mod 2¹²⁸): one step of the
// generator, or several composed.
type lcg struct{ mul, add pcg }

// pcgStep is math/rand/v2's single step.
var pcgStep = lcg{
	mul: pcg{2549297995355413924, 4865540595714422341},
	add: pcg{6364136223846793005, 1442695040888963407},
}

// mul128 is a·b mod 2¹²⁸.
func mul128(a, b pcg) pcg {
	hi, lo := bits.Mul64(a.lo, b.lo)
	hi += a.hi*b.lo + a.lo*b.hi
	return pcg{hi, lo}
}

// add128 is a+b mod 2¹²⁸.
func add128(a, b pcg) pcg {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return pcg{hi, lo}
}

// apply is f(s).
func (f lcg) apply(s pcg) pcg { return add128(mul128(s, f.mul), f.add) }

// then is g∘f: f, then g.
func (f lcg) then(g lcg) lcg {
	return lcg{mul: mul128(f.mul, g.mul), add: g.apply(f.add)}
}

// pow is f applied n times (the identity for n = 0), by squaring.
func (f lcg) pow(n uint64) lcg {
	r := lcg{mul: pcg{0, 1}}
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			r = r.then(f)
		}
		f = f.then(f)
	}
	return r
}

// dxsm is the output of state s: rand.PCG's Uint64 after its step to s.
func dxsm(s pcg) uint64 {
	const cheapMul = 0xda942042e4dd58b5
	hi := s.hi
	hi ^= hi >> 32
	hi *= cheapMul
	hi ^= hi >> 48
	hi *= s.lo | 1
	return hi
}

// pcgLanes is how many states uniformFill advances side by side: their
// steps are independent, so the core overlaps their multiplications.
const pcgLanes = 4

// pcgLaneStep is pcgLanes steps: what each lane of uniformFill advances by.
var pcgLaneStep = pcgStep.pow(pcgLanes)

// uniformFill writes into dst the uniform numbers on [lo, lo+span) of the
// generator's outputs from state s on, in order: dst[i] is lo +
// span·u_i converted to T, u_i the (i+1)-th output's low 53 bits over 2⁵³
// (rand.Rand's Float64), for the generator that is in state s before its
// first step. The product span·u_i is rounded before the sum (the
// explicit conversion keeps a compiler from fusing the two into one FMA,
// as Go does on arm64): the numbers are the same on every architecture,
// and the same as the C kernel's and NumPy's.
func uniformFill[T float32 | float64](dst []T, s pcg, lo, span float64) {
	s0 := pcgStep.apply(s)
	s1 := pcgStep.apply(s0)
	s2 := pcgStep.apply(s1)
	s3 := pcgStep.apply(s2)
	j := pcgLaneStep
	i := 0
	for ; i+pcgLanes <= len(dst); i += pcgLanes {
		d := dst[i : i+pcgLanes : i+pcgLanes]
		d[0] = T(lo + float64(span*unit53(dxsm(s0))))
		d[1] = T(lo + float64(span*unit53(dxsm(s1))))
		d[2] = T(lo + float64(span*unit53(dxsm(s2))))
		d[3] = T(lo + float64(span*unit53(dxsm(s3))))
		s0, s1, s2, s3 = j.apply(s0), j.apply(s1), j.apply(s2), j.apply(s3)
	}
	for _, st := range [...]pcg{s0, s1, s2} {
		if i == len(dst) {
			break
		}
		dst[i] = T(lo + float64(span*unit53(dxsm(st))))
		i++
	}
}

// unit53 is rand.Rand's Float64 of the output x: its low 53 bits over 2⁵³.
func unit53(x uint64) float64 { return float64(x<<11>>11) / (1 << 53) }
