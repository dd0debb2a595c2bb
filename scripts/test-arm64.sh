#!/usr/bin/env bash
# make test-arm64: the linux/arm64 build, cross-compiled with Debian's
# aarch64-linux-gnu-gcc and run under qemu-user (qemu-aarch64, with
# QEMU_LD_PREFIX=/usr/aarch64-linux-gnu), on this machine:
#
#   1. the kernels' tests (internal/cpukern, every instruction set level
#      this build has, and internal/fft3) and the ops' conformance suites
#      (ops/...), go test $SHORT -exec qemu-aarch64;
#   2. a smoke test of the CLI: every workload (interp, affinity, drr,
#      wavelet) on small built-in inputs with the arm64 binary and with
#      this machine's own, their outputs compared numerically
#      (scripts/arm64_compare.py, RTOL norm-wise; integers exactly, and
#      the float32 dot products bit for bit against AVX-512's), the
#      --report naming linux/arm64 and its instruction sets, and an
#      affinity run in two shards merged bit for bit equal to the whole;
#   3. the GPU flavour on the CUDA emulator (tag tapeloop_cudaemu)
#      cross-built, and the conformance suites of ops run on it under qemu
#      where an arm64 C++ compiler is installed (TAPELOOP_EMU_CXX,
#      aarch64-linux-gnu-g++ from g++-aarch64-linux-gnu), else said.
#
# Timings under qemu mean nothing. Needs gcc-aarch64-linux-gnu,
# g++-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user
# (scripts/install-arm64-cross.sh installs them as root). Six to
# ten minutes on 2 cores (a cold build cache adds the cross build). ARM64_STEPS picks
# steps (default 123).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
SHORT=${SHORT--short}
RTOL=${RTOL:-1e-5}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=${ARM64_OUT:-bin/arm64}
STEPS=${ARM64_STEPS:-123}

for t in aarch64-linux-gnu-gcc qemu-aarch64; do
	if ! command -v "$t" >/dev/null 2>&1; then
		echo "test-arm64: $t not found: install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user (scripts/install-arm64-cross.sh, as root)" >&2
		exit 1
	fi
done
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
cross() { GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc "$@"; }
step() { printf '\n== %s\n' "$*"; }

if [[ $STEPS == *1* ]]; then
step "1. kernels and the ops' conformance suites under qemu-aarch64"
cross "$GO" test $SHORT -timeout 30m -exec qemu-aarch64 ./internal/cpukern ./internal/fft3 ./ops/...
fi

if [[ $STEPS == *2* ]]; then
step "2. the CLI, arm64 against $(go env GOARCH), on built-in inputs"
mkdir -p "$OUT"
cross "$GO" build -o "$OUT/tapeloop" ./cmd/tapeloop
"$GO" build -o "$OUT/tapeloop-host" ./cmd/tapeloop
work=$(mktemp -d "${TMPDIR:-/tmp}/tapeloop-arm64.XXXXXX")
trap 'rm -rf "$work"' EXIT
export TAPELOOP_MEM_LIMIT=256MiB GOMAXPROCS=2
unset TAPELOOP_DEVICE TAPELOOP_DEVICES
# case NAME ARGS...: the same command with both binaries, each in its own
# directory, its standard output kept as stdout.txt.
case_() {
	local name=$1
	shift
	for side in host arm64; do
		local d="$work/$side/$name" bin
		bin=$PWD/$OUT/tapeloop-host
		[ "$side" = arm64 ] && bin="qemu-aarch64 $PWD/$OUT/tapeloop"
		mkdir -p "$d"
		(cd "$d" && $bin "$@" >stdout.txt) || { echo "test-arm64: $side: tapeloop $* failed" >&2; exit 1; }
	done
	printf '%-22s %s\n' "$name" "$(cat "$work/arm64/$name/stdout.txt" | head -1)"
}
case_ interp-sumsq interp --points 20011 --interpolants 37 --grid 301 --quiet --out q.npy --report report.json
case_ interp-formula interp --points 5003 --interpolants 33 --grid 129 --reduce 'max(v)' --out q.npy --quiet
case_ interp-f64-direct interp --points 3001 --interpolants 29 --grid 97 --dtype float64 --method direct --reduce none --out q.npy --quiet
case_ affinity-cosine-topk affinity -n 157 --height 9 --width 13 --metric cosine --topk 5 --out nn.npz --quiet --report report.json
case_ affinity-l1 affinity -n 61 --height 7 --width 11 --metric l1 --out m.npy --quiet
case_ affinity-l2-f64 affinity -n 53 --height 5 --width 9 --metric l2 --dtype float64 --out m.npy --quiet
case_ affinity-dot affinity -n 301 --height 17 --width 23 --metric dot --out m.npy --quiet
"$PYTHON" -c 'import sys, numpy as np; np.save(sys.argv[1], np.random.default_rng(7).integers(0, 256, (203, 331), dtype=np.uint8))' "$work/u8.npy"
case_ affinity-u8-dot affinity --images "$work/u8.npy" --metric dot --dtype int64 --out m.npy --quiet
case_ affinity-u8-l1 affinity --images "$work/u8.npy" --metric l1 --dtype int32 --out m.npy --quiet
case_ affinity-formula affinity -n 67 --height 8 --width 9 --formula 'exp(-sum((a-b)^2)/(2*s^2))' --param s=16 --out m.npy --quiet
case_ drr-siddon drr --size 24 --orbit 3 --detector 20x18 --out d --quiet --report report.json
case_ drr-trilinear drr --size 22 --orbit 2 --detector 16x15 --method trilinear --post '1-exp(-p)' --filter gauss:sigma_px=1.5 --out d --quiet
case_ wavelet wavelet --size 20x18x22 --theta 0,pi/4 --phi 0,pi/3 --xi 1,2 --quiet --report report.json
case_ wavelet-kernel wavelet --size 17x19x16 --theta 0 --phi 0 --xi 1,2 --kernel 'exp(-(u*u+v*v+w*w*xi)/8)' --reach 5 --quiet

# The packed matrix product adds every pair in the same order on arm64
# (NEON) and on AVX-512: the same float32 values bit for bit.
if [ "$("$OUT/tapeloop-host" info | sed -n 's/^kernel: float32 dot products *//p')" = "packed matrix product (avx512f)" ]; then
	cmp "$work/host/affinity-dot/m.npy" "$work/arm64/affinity-dot/m.npy" ||
		{ echo "test-arm64: the float32 dot products differ from AVX-512's" >&2; exit 1; }
	echo "affinity-dot: the float32 dot products equal AVX-512's bit for bit"
fi

# Every report names the platform and the kernels' instruction set.
for r in "$work"/arm64/*/report.json; do
	grep -q '"arch": "arm64"' "$r" && grep -q '"os": "linux"' "$r" && grep -q '"kernels": "neon"' "$r" ||
		{ echo "test-arm64: $r does not name linux/arm64 and neon:" >&2; grep -A8 '"platform"' "$r" >&2; exit 1; }
done
echo "reports: linux/arm64, kernels neon"

# Two shards merged equal the whole run bit for bit, on arm64.
a="$work/arm64/shards"
mkdir -p "$a"
args=(affinity -n 71 --height 6 --width 10 --metric dot --quiet)
(cd "$a" && for i in 0 1; do qemu-aarch64 "$OLDPWD/$OUT/tapeloop" "${args[@]}" --shard $i/2 --out s$i.npz; done &&
	qemu-aarch64 "$OLDPWD/$OUT/tapeloop" merge --out merged.npy s0.npz s1.npz &&
	qemu-aarch64 "$OLDPWD/$OUT/tapeloop" "${args[@]}" --out whole.npy)
if cmp -s "$a/merged.npy" "$a/whole.npy"; then
	echo "shards: two shards merged equal the whole run bit for bit"
else
	echo "test-arm64: arm64: two shards merged differ from the whole run" >&2
	exit 1
fi
rm -rf "$a"

"$PYTHON" scripts/arm64_compare.py "$work/host" "$work/arm64" "$RTOL"
fi

if [[ $STEPS == *3* ]]; then
step "3. the GPU flavour on the CUDA emulator, cross-built"
cross "$GO" build -tags tapeloop_cudaemu -o "$OUT/emu/tapeloop-cuda" ./cmd/tapeloop
cross "$GO" test -c -tags tapeloop_cudaemu -o "$OUT/emu/ops-cuda.test" ./ops
cross "$GO" test -c -tags tapeloop_cudaemu -o "$OUT/emu/pairwise-cuda.test" ./ops/pairwise
cxx=${TAPELOOP_EMU_CXX:-aarch64-linux-gnu-g++}
if command -v "$cxx" >/dev/null 2>&1; then
	# The ops' conformance suites on the emulated GPU (about five minutes).
	# ops/pairwise's are left out, and so are the gradients' (RigidDRR,
	# Project, Interp1DGrad): under qemu-user their emulated kernels grow
	# past 20 GiB of memory (the process was killed at 24 GiB; natively
	# they take tens of MiB, and make test-emu runs them on this machine).
	TAPELOOP_EMU_CXX=$cxx cross "$GO" test $SHORT -timeout 30m -tags tapeloop_cudaemu -exec qemu-aarch64 -run 'Conformance' -skip 'RigidDRR|Project|Interp1DGrad' ./ops
else
	echo "note: $cxx not installed (g++-aarch64-linux-gnu): the emulated GPU built for arm64, its tests not run"
fi
fi
echo
echo "test-arm64: ok"
