"""The Python package over the GPU build of the library: each compiled
object with device="cuda" against the same object with device="cpu", over
several calls with new inputs each, and the time per call over many calls.
Run by scripts/gpu-check.sh (step 5) with TAPELOOP_LIB pointing at the GPU
build (bin/libtapeloop-cuda.so) and PYTHONPATH=python; SMALL=1 in the
argument list runs it at the emulator's sizes. Prints one table; exits 1 if a
result differs beyond its tolerance or, over 20 calls or more on a GPU, the
time per call drifts (the last quarter's median over 1.5 times the first's)."""
import sys
import time

import numpy as np

import tapeloop

small = "SMALL=1" in sys.argv[1:]
rng = np.random.default_rng(5)
rows, failed = [], False


def check(name, cpu, gpu, calls, tol):
    """Calls both objects with each of calls' inputs (a list of argument
    tuples); compares every result; times the GPU object's calls."""
    global failed
    worst, times = 0.0, []
    for args in calls:
        want = cpu(*args)
        t0 = time.perf_counter()
        got = gpu(*args)
        times.append(time.perf_counter() - t0)
        pairs = [(got[k], want[k]) for k in want] if isinstance(want, dict) else \
            list(zip(got, want)) if isinstance(want, tuple) else [(got, want)]
        for g, w in pairs:
            g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
            worst = max(worst, float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-30)))
    n = len(times) // 4
    drift = np.median(times[-n:]) / np.median(times[:n]) if n else 1.0
    # the drift counts only where there are calls enough, on a real GPU
    ok = worst <= tol and (small or len(times) < 20 or drift <= 1.5)
    failed |= not ok
    rows.append((name, len(times), f"{worst:.1e}", f"{tol:.0e}", f"{1e3 * np.median(times):.2f}", f"{drift:.2f}",
                 "ok" if ok else "FAILED"))


def both(cls, *args, **kw):
    return cls(*args, **kw), cls(*args, device="cuda", **kw)


n, d, k = (120, 300, 40) if small else (1000, 2048, 60)
for metric in ["dot", "cosine", "l2", "l1"]:
    cpu, gpu = both(tapeloop.Affinity, metric, shape=(n, d), block=32)
    check(f"affinity {metric} ({n}, {d})", cpu, gpu,
          [(rng.standard_normal((n, d)).astype(np.float32),) for _ in range(k // 10)], 1e-4)
cpu, gpu = both(tapeloop.Affinity, formula="exp(-sum((a-b)^2)/(2*s^2))", params={"s": 30}, shape=(n, d), block=32)
check("affinity formula", cpu, gpu, [(rng.standard_normal((n, d)).astype(np.float32),) for _ in range(3)], 1e-4)
# tf32: the GPU's dot products on TF32 tensor cores (operands rounded to 10 bits), against float32 on the CPU
cpu, gpu = tapeloop.Affinity("dot", shape=(n, d), block=32), tapeloop.Affinity("dot", shape=(n, d), block=32,
                                                                               device="cuda", tf32=True)
check("affinity dot, tf32", cpu, gpu, [(rng.standard_normal((n, d)).astype(np.float32),) for _ in range(3)], 2e-3)

vs, det, poses = (24, (16, 20), 40) if small else (128, (128, 128), 100)
vol = rng.uniform(0, 0.03, (vs, vs, vs)).astype(np.float32)
cpu, gpu = both(tapeloop.DRR, vol, detector=det)
orbit = cpu.orbit(poses, pixel=2.0 * 256 / vs)
check(f"drr {vs}³ → {det[0]}×{det[1]}, a pose per call", cpu, gpu, [(p,) for p in orbit], 1e-4)

m, g, pts = (20, 64, 5000) if small else (300, 4096, 1_000_000)
f = np.cumsum(rng.standard_normal((m, g)), axis=1)
cpu, gpu = both(tapeloop.Interp, f, 0.0, 1 / (g - 1), batch=pts // 4)
check(f"interp {m}×{g}, {pts} points", cpu, gpu, [(rng.uniform(0, 1, pts).astype(np.float32),) for _ in range(20)], 1e-4)

ws = 12 if small else 96
cpu, gpu = both(tapeloop.Wavelet, rng.standard_normal((ws, ws, ws)).astype(np.float32), boundary="wrap")
check(f"wavelet {ws}³ wrap", cpu, gpu, [([t], [0.5], [1, 2]) for t in np.linspace(0, 3, 8)], 1e-4)

print("| object | calls | worst relative difference | tolerance | median ms per GPU call | drift | |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(map(str, r)) + " |")
sys.exit(1 if failed else 0)
