#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU and no Go toolchain. Build the
# inputs beforehand where Go is: `make gpu-bin` (bin/tapeloop-cuda,
# bin/ops-cuda.test and bin/pairwise-cuda.test). Runs in a few minutes on one GPU:
#   1. the ops' conformance suites (ops/conformance_test.go and ops/pairwise's: every op's
#      cases against their references, run unchanged on the CPU and on the
#      GPU; the GPU's outputs poisoned with NaN before the second run) and
#      the GPU twins' own tests (stream order, WriteFull);
#   2. timings at the seed sizes (each launch synchronised before the
#      clock is read);
#   3. whole runs through tapeloop-cuda with --report: time per batch,
#      drift over ≥ 1000 batches, device memory planned and in use; and
#      users' affinity formulas (kernels compiled at run time by NVRTC),
#      their checksums against the CPU's;
#   4. the JAX and CuPy peers (bench/peers) on the same inputs, if present;
#   5. the Python package over the GPU build of the library
#      (bin/libtapeloop-cuda.so, if NumPy is there): each object with
#      device="cuda" against device="cpu" (scripts/gpu_python_check.py).
# Prints one table per step; exits non-zero if a check fails. Peers are
# bounded (PEER_TIMEOUT seconds each, none started after BUDGET_S seconds),
# so the whole script fits a lent GPU's few minutes.
#
# GPU_CHECK_SMALL=1 runs steps 1, 3 and 5 at small sizes and skips 2 and 4:
# with binaries of the CUDA emulator build (`make gpu-bin-emu`) it
# rehearses this script on a machine without a GPU (`make gpu-check-dry`).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
OUT=${OUT:-$(mktemp -d)}
PY=${PYTHON:-python3}
SMALL=${GPU_CHECK_SMALL:-0}
PEER_TIMEOUT=${PEER_TIMEOUT:-60} # seconds per peer run
BUDGET_S=${BUDGET_S:-420}        # no peer starts after this many seconds of the script
status=0
peer() { # timeout-bounded peer run, skipped once the budget is spent
	if [ "$SECONDS" -ge "$BUDGET_S" ]; then
		echo "skipped (budget): $*"
		return
	fi
	timeout "$PEER_TIMEOUT" "$PY" "$@" || echo "peer failed or timed out: $*"
}
fail() { echo "FAILED: $*"; status=1; }
# cuBLAS and cuFFT are loaded at run time: point at them if the usual
# sonames are not on the loader's path (GPU machines often have them only
# in a Python package).
if [ -z "${TAPELOOP_CUDA_LIBDIR:-}" ] && ! ldconfig -p 2>/dev/null | grep -q libcufft.so; then
	lib=$(find / -name 'libcufft.so*' -not -path '/proc/*' 2>/dev/null | head -1)
	[ -n "$lib" ] && export TAPELOOP_CUDA_LIBDIR=$(dirname "$lib") TAPELOOP_CUFFT=$lib
	blas=$(find / -name 'libcublas.so*' -not -path '/proc/*' 2>/dev/null | head -1)
	[ -n "$blas" ] && export TAPELOOP_CUBLAS=$blas
fi
# NVRTC compiles users' formulas at run time; it sits in a directory of
# its own in the Python packages.
if [ -z "${TAPELOOP_NVRTC:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
	nvrtc=$(find / -name 'libnvrtc.so*' -not -path '/proc/*' 2>/dev/null | sort -V -r | head -1)
	[ -n "$nvrtc" ] && export TAPELOOP_NVRTC=$nvrtc
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "(no nvidia-smi)"
"$BIN/tapeloop-cuda" info | grep -E '^(tapeloop|cuda|cpus)' || fail "tapeloop-cuda does not start"

if [ "$SMALL" = 1 ]; then
	POINTS=20000 IBATCH=20 SIZE=32 ORBIT=20 DBATCH=5 FLAT=40 WSIZE=12x12x12 WANG=0:pi:3 NIMG=300 HW=20 FNIMG=300 FHW=20
else
	POINTS=1000000 IBATCH=1000 SIZE=256 ORBIT=1000 DBATCH=50 FLAT=1000 WSIZE=200x200x200 WANG=0:pi:10 NIMG=10000 HW=100 FNIMG=3000 FHW=64
fi

echo "== 1. ops on the GPU: conformance suites (cpu and cuda) and the twins' own tests"
# Each test's result, and of its subtests only the failures and what they
# report (-test.v lists every case; the whole log stays in $OUT/ops.log and $OUT/pairwise.log).
for t in ops pairwise; do
	"$BIN/$t-cuda.test" -test.run 'CUDA|Conformance' -test.v >"$OUT/$t.log" 2>&1 || fail "$t-cuda.test"
	grep -E '^(--- |ok|FAIL|PASS|panic)|^ +--- FAIL|^ +[a-z_]+_test\.go:[0-9]+: ' "$OUT/$t.log"
	grep -qE '^--- PASS: TestConformance' "$OUT/$t.log" || fail "no conformance suite of $t ran"
done

if [ "$SMALL" != 1 ]; then
	echo "== 2. timings (go test -bench, synchronised)"
	for t in ops pairwise; do
		"$BIN/$t-cuda.test" -test.run '^$' -test.bench 'CUDA' -test.benchtime 20x 2>&1 | grep -E '^(Benchmark|FAIL|panic)' || fail "$t benchmarks"
	done
fi

echo "== 3. whole runs (--device cuda --report)"
report() { # name json
	"$PY" - "$1" "$2" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[2]))
it, s, plan = r["iterations"], r["summary"], r.get("plan") or {}
dev = [i.get("device_bytes", 0) for i in it]
MiB = 2**20
print(f"{sys.argv[1]:<34} {len(it):>5} batches  median {s['median_ms']:9.3f} ms (GPU busy {s.get('median_device_ms', 0):8.3f})  drift {s['drift']:.3f}"
      f"  device: planned {plan.get('planned_device_bytes', 0) / MiB:7.0f} MiB, in use max {max(dev) / MiB:7.0f} MiB"
      f" (growth {(max(dev) - dev[0]) / MiB:.0f})  limit {r['mem_limit_bytes'] / MiB:.0f} MiB")
PYEOF
}
whole() { # name json args…
	local name=$1 json=$2
	shift 2
	"$BIN/tapeloop-cuda" "$@" --device cuda --report "$json" -q >"$json.out" 2>&1 || { cat "$json.out"; fail "$name"; return; }
	report "$name" "$json" || fail "$name: report"
}
whole "interp seed" "$OUT/interp.json" interp --points $POINTS --mem-limit 2GiB
whole "interp, $FLAT batches" "$OUT/interp-flat.json" interp --points $((FLAT * IBATCH)) --batch $IBATCH --mem-limit 2GiB
whole "drr trilinear ${SIZE}^3" "$OUT/drr.json" drr --size $SIZE --orbit $ORBIT --method trilinear --batch $DBATCH --mem-limit 4GiB
whole "drr siddon ${SIZE}^3" "$OUT/drrs.json" drr --size $SIZE --orbit $ORBIT --method siddon --batch $DBATCH --mem-limit 4GiB
whole "drr trilinear, $FLAT batches of 1" "$OUT/drr-flat.json" drr --size $SIZE --orbit $FLAT --method trilinear --batch 1 --mem-limit 4GiB
whole "wavelet $WSIZE wrap, 20 per batch" "$OUT/wav.json" wavelet --size $WSIZE --theta $WANG --phi $WANG --xi 1,2,4,8 --boundary wrap \
	--batch 20 --mem-limit 4GiB --out "$OUT/w.csv"
whole "affinity dot tf32 N=$NIMG" "$OUT/aff.json" affinity -n $NIMG --height $HW --width $HW --metric dot --tf32 --mem-limit 8GiB
whole "affinity l1 N=$NIMG" "$OUT/affl1.json" affinity -n $NIMG --height $HW --width $HW --metric l1 --mem-limit 8GiB
whole "affinity dot tf32 top10 N=$NIMG" "$OUT/afftop.json" affinity -n $NIMG --height $HW --width $HW --metric dot --tf32 --topk 10 \
	--mem-limit 8GiB
# Users' formulas: the per-pair kernel compiled at run time (NVRTC), and a
# formula rewritten over dot products (cuBLAS, then the formula on the
# host); each run's checksum (the sum of all affinities) against the CPU's
# run of the same command.
same_checksum() { # name tolerance args…
	local name=$1 tol=$2
	shift 2
	whole "$name" "$OUT/$name.json" "$@"
	"$BIN/tapeloop-cuda" "$@" --device cpu --report "$OUT/$name-cpu.json" -q >"$OUT/$name-cpu.out" 2>&1 ||
		{ cat "$OUT/$name-cpu.out"; fail "$name on the CPU"; return; }
	"$PY" - "$OUT/$name.json" "$OUT/$name-cpu.json" "$tol" <<'PYEOF' || fail "$name: checksum"
import json, sys
g, c = (json.load(open(f))["result"]["checksum"] for f in sys.argv[1:3])
rel = abs(g - c) / max(abs(c), 1e-300)
print(f"  checksum cuda {g!r}, cpu {c!r}: relative difference {rel:.2e} (tolerance {sys.argv[3]})")
sys.exit(0 if rel <= float(sys.argv[3]) else 1)
PYEOF
}
same_checksum formula-l1 1e-5 affinity -n $FNIMG --height $FHW --width $FHW --formula '-sum(abs(a-b))' --mem-limit 8GiB
same_checksum formula-gauss 1e-4 affinity -n $FNIMG --height $FHW --width $FHW --formula 'exp(-sum((a-b)^2)/(2*s^2))' \
	--param s=$FHW --mem-limit 8GiB
grep -h -E '^(drr|interp|wavelet|affinity):' "$OUT"/*.json.out | cut -c1-150
if [ "$SMALL" != 1 ]; then # the demo, on the GPU: its results column should read as on the CPU
	"$BIN/tapeloop-cuda" demo --device cuda || fail "demo --device cuda"
fi

if [ "$SMALL" != 1 ]; then
	echo "== 4. JAX / CuPy peers (each up to ${PEER_TIMEOUT}s; skipped after ${BUDGET_S}s in all)"
	if "$PY" -c 'import jax' 2>/dev/null; then
		"$PY" - "$OUT" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(1)
np.save(f"{d}/f.npy", np.cumsum(rng.standard_normal((300, 4096)), axis=1).astype(np.float32))
np.save(f"{d}/x.npy", rng.uniform(0, 1, 1_000_000).astype(np.float32))
np.save(f"{d}/vol.npy", rng.random((256, 256, 256), dtype=np.float32))
PYEOF
		for v in fix original; do
			peer bench/peers/interp_jax.py --f "$OUT/f.npy" --x "$OUT/x.npy" --variant $v
		done
		peer bench/peers/drr_jax.py --volume "$OUT/vol.npy" --origin=-128,-128,-128 --orbit 64 --variant fix
		peer bench/peers/drr_jax.py --volume "$OUT/vol.npy" --origin=-128,-128,-128 --orbit 8 --variant original
	fi
	if "$PY" -c 'import cupy' 2>/dev/null; then
		"$PY" -c "import numpy as np; np.save('$OUT/w.npy', np.random.default_rng(2).standard_normal((200,200,200)).astype(np.float32))"
		peer bench/peers/wavelet_cupy.py --volume "$OUT/w.npy" --theta 0:3.14159:4 --phi 0:3.14159:2 --xi 1,2 --boundary wrap --variant fix
		peer bench/peers/wavelet_cupy.py --volume "$OUT/w.npy" --theta 0.3 --phi 0.5 --xi 1 --boundary wrap --variant original
	fi
fi
echo "== 5. the Python package on the GPU: device=cuda against device=cpu"
if [ -f "$BIN/libtapeloop-cuda.so" ] && "$PY" -c 'import numpy' 2>/dev/null; then
	small=""
	[ "$SMALL" = 1 ] && small=SMALL=1
	TAPELOOP_LIB="$BIN/libtapeloop-cuda.so" PYTHONPATH=python timeout 300 "$PY" scripts/gpu_python_check.py $small ||
		fail "python on the GPU"
else
	echo "skipped: no $BIN/libtapeloop-cuda.so (make gpu-bin) or no NumPy"
fi
[ $status = 0 ] && echo "gpu-check: all checks passed" || echo "gpu-check: some checks FAILED"
exit $status
