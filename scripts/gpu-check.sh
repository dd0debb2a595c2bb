#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU and no Go toolchain. Build the
# inputs beforehand where Go is: `make gpu-bin` (bin/tapeloop-cuda and
# bin/ops-cuda.test). Runs in a few minutes on one GPU:
#   1. every CUDA op against its CPU op on fresh random inputs, outputs
#      poisoned with NaN before each run (norm-wise relative error ≤ 1e-5);
#   2. timings at the seed sizes (each launch synchronised before the
#      clock is read);
#   3. whole runs through tapeloop-cuda with --report: time per batch,
#      drift, device memory high-water against --mem-limit;
#   4. the JAX and CuPy peers (bench/peers) on the same inputs, if present.
# Prints one table per step; exits non-zero if a correctness check fails.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
OUT=${OUT:-$(mktemp -d)}
PY=${PYTHON:-python3}
status=0
# cuFFT is loaded at run time: point at one if the usual sonames are not on
# the loader's path (GPU machines often have it only in a Python package).
if [ -z "${TAPELOOP_CUDA_LIBDIR:-}" ] && ! ldconfig -p 2>/dev/null | grep -q libcufft.so; then
	lib=$(find / -name 'libcufft.so*' -not -path '*/proc/*' 2>/dev/null | head -1)
	[ -n "$lib" ] && export TAPELOOP_CUDA_LIBDIR=$(dirname "$lib") TAPELOOP_CUFFT=$lib
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

echo "== 1. CUDA ops against the CPU ops"
"$BIN/ops-cuda.test" -test.run 'CUDA' -test.v 2>&1 | grep -E '^(=== RUN|--- |    |ok|FAIL|PASS)' || status=1

echo "== 2. timings (go test -bench, synchronised)"
"$BIN/ops-cuda.test" -test.run '^$' -test.bench 'CUDA' -test.benchtime 20x 2>&1 | grep -E '^Benchmark' || status=1

echo "== 3. whole runs (--device cuda --report)"
report() { # name json
	"$PY" - "$1" "$2" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[2]))
it = r["iterations"]
dev = max((i.get("device_bytes", 0) for i in it), default=0)
s = r["summary"] if "summary" in r else r
print(f"{sys.argv[1]:<28} batches {len(it):>5}  median {s.get('median_ms', 0):8.3f} ms/batch  drift {s.get('drift', 0):.3f}"
      f"  device high-water {dev / 2**20:8.0f} MiB  limit {r.get('mem_limit_bytes', 0) / 2**20:.0f} MiB")
PYEOF
}
"$BIN/tapeloop-cuda" interp --device cuda --mem-limit 2GiB --report "$OUT/interp.json" -q && report "interp seed (10^6 queries)" "$OUT/interp.json" || status=1
"$BIN/tapeloop-cuda" drr --device cuda --size 256 --orbit 1000 --method trilinear --batch 50 --mem-limit 4GiB \
	--report "$OUT/drr.json" -q && report "drr trilinear 256^3, 1000 poses" "$OUT/drr.json" || status=1
"$BIN/tapeloop-cuda" drr --device cuda --size 256 --orbit 1000 --method siddon --batch 50 --mem-limit 4GiB \
	--report "$OUT/drrs.json" -q && report "drr siddon 256^3, 1000 poses" "$OUT/drrs.json" || status=1
"$BIN/tapeloop-cuda" wavelet --device cuda --size 200x200x200 --theta 0:pi:10 --phi 0:pi:10 --xi 1,2,4,8 --boundary wrap \
	--batch 4 --mem-limit 4GiB --out "$OUT/w.csv" --report "$OUT/wav.json" -q && report "wavelet 200^3 wrap, 400 comb." "$OUT/wav.json" || status=1
"$BIN/tapeloop-cuda" affinity --device cuda -n 10000 --height 100 --width 100 --metric dot --tf32 --mem-limit 8GiB \
	--report "$OUT/aff.json" -q && report "affinity dot N=10^4 D=10^4" "$OUT/aff.json" || status=1

echo "== 4. JAX / CuPy peers"
if "$PY" -c 'import jax' 2>/dev/null; then
	"$PY" - "$OUT" <<'PYEOF'
import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(1)
np.save(f"{d}/f.npy", np.cumsum(rng.standard_normal((300, 4096)), axis=1).astype(np.float32))
np.save(f"{d}/x.npy", rng.uniform(0, 1, 1_000_000).astype(np.float32))
np.save(f"{d}/vol.npy", rng.random((256, 256, 256), dtype=np.float32))
PYEOF
	for v in fix seed; do
		timeout 120 "$PY" bench/peers/interp_jax.py --f "$OUT/f.npy" --x "$OUT/x.npy" --variant $v || echo "interp_jax $v: failed or timed out"
	done
	timeout 180 "$PY" bench/peers/drr_jax.py --volume "$OUT/vol.npy" --origin=-128,-128,-128 --orbit 64 --variant fix || echo "drr_jax fix: failed"
	timeout 180 "$PY" bench/peers/drr_jax.py --volume "$OUT/vol.npy" --origin=-128,-128,-128 --orbit 8 --variant seed || echo "drr_jax seed: failed"
fi
if "$PY" -c 'import cupy' 2>/dev/null; then
	"$PY" -c "import numpy as np; np.save('$OUT/w.npy', np.random.default_rng(2).standard_normal((200,200,200)).astype(np.float32))"
	timeout 120 "$PY" bench/peers/wavelet_cupy.py --volume "$OUT/w.npy" --theta 0:3.14159:4 --phi 0:3.14159:2 --xi 1,2 --boundary wrap --variant fix || echo "wavelet_cupy fix: failed"
	timeout 120 "$PY" bench/peers/wavelet_cupy.py --volume "$OUT/w.npy" --theta 0.3 --phi 0.5 --xi 1 --boundary wrap --variant seed || echo "wavelet_cupy seed: failed"
fi
exit $status
