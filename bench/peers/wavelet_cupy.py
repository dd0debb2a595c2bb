#!/usr/bin/env python3
"""The wavelet sweep in CuPy, for GPU machines.

--variant original is the original loop, corrected: per combination,
cupyx.scipy.ndimage.convolve of the 3-D volume (the seed raveled it to 1-D)
with the kernel, ξ > 0 (the original case's ξ = 0 divides by zero), and here every
combination synchronised before the clock is read — the seed timed only
the asynchronous launch, which is how the first combination "took" 0.1 s.
--variant fix is the answer's fix: FFT convolution, the padded volume
transformed once per padding, per combination one kernel transform, a
product and an inverse (cupy.fft), all on the device.

Same inputs, LISTs and CSV as wavelet_scipy.py and `tapeloop wavelet`.
Prints one JSON line: median seconds per combination, peak pool memory.
"""
import argparse
import json
import time

import cupy as cp
import numpy as np
from cupyx.scipy.ndimage import convolve as convolve_gpu

from wavelet_scipy import hat, parse_list


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--volume", required=True)
    p.add_argument("--theta", default="0:pi:4")
    p.add_argument("--phi", default="0:pi:2")
    p.add_argument("--xi", default="1,2")
    p.add_argument("-a", type=float, default=1.0)
    p.add_argument("--boundary", default="reflect", choices=["reflect", "wrap"])
    p.add_argument("--variant", choices=["original", "fix"], default="fix")
    p.add_argument("--out")
    args = p.parse_args()
    v = cp.asarray(np.load(args.volume).astype(np.float32))
    pool = cp.get_default_memory_pool()
    rows, times, cache = [], [], {}
    mode = "symmetric" if args.boundary == "reflect" else "wrap"
    for th in parse_list(args.theta):
        for ph in parse_list(args.phi):
            for xi in parse_list(args.xi):
                k = hat(args.a, th, ph, xi)
                cp.cuda.Stream.null.synchronize()
                t0 = time.perf_counter()
                kd = cp.asarray(k.astype(np.float32))
                if args.variant == "original":
                    g = convolve_gpu(v, kd, mode="reflect" if args.boundary == "reflect" else "wrap")
                else:
                    h = tuple(e // 2 for e in k.shape)
                    if h not in cache:  # the volume, padded and transformed once per padding
                        vp = cp.pad(v, [(e, e) for e in h], mode=mode)
                        cache.clear()
                        cache[h] = (vp.shape, cp.fft.rfftn(vp))
                    shape, spec = cache[h]
                    kp = cp.zeros(shape, cp.float32)
                    kp[: k.shape[0], : k.shape[1], : k.shape[2]] = kd
                    full = cp.fft.irfftn(cp.fft.rfftn(kp) * spec, s=shape)
                    # circular convolution: the valid block starts at 2h
                    g = full[2 * h[0]: 2 * h[0] + v.shape[0], 2 * h[1]: 2 * h[1] + v.shape[1],
                             2 * h[2]: 2 * h[2] + v.shape[2]]
                g64 = g.astype(cp.float64)
                st = (float((g64 ** 2).sum()), float(g64.std()), float(g64.max()), float((k ** 2).sum()))
                cp.cuda.Stream.null.synchronize()
                times.append(time.perf_counter() - t0)
                rows.append((th, ph, xi) + st)
    if args.out:
        with open(args.out, "w") as f:
            f.write("theta,phi,xi,energy,std,max,wavelet_energy\n")
            for r in rows:
                f.write(",".join(repr(x) for x in r) + "\n")
    print(json.dumps({"peer": f"cupy-{args.variant}", "seconds": float(np.median(times[1:] or times)),
                      "times": times, "combinations": len(times), "peak_pool_bytes": pool.total_bytes(),
                      "cupy": cp.__version__}))


if __name__ == "__main__":
    main()
