#!/usr/bin/env python3
"""The oriented wavelet sweep with FFT convolution
(scipy.signal.fftconvolve) instead of a direct convolution with a
volume-sized kernel: for each (θ, φ, ξ > 0), G = V ∗ ψ with scipy.ndimage.convolve
semantics (the volume padded by the kernel's half-widths, half-sample
symmetric for reflect or periodic for wrap, then a 'valid' FFT
convolution), and the statistics tapeloop reports.

At its best: the FFTs (SciPy's pocketfft, single precision for float32
data) run on --workers threads (scipy.fft.set_workers; default all cores),
and --warmup sweeps run untimed first, so that the timed sweep finds
pocketfft's plans for every transform size already made and cached, as a
long-running program would.

Without --volume: one combination on a random --size³ volume, zero padded
("same" mode), timed --repeat times (the benchmark's peer). With --volume:
the sweep over --theta × --phi × --xi, the CSV tapeloop writes to --out.
Prints one JSON line: median seconds per combination, peak RSS, and
"config" (SciPy's version, the FFT threads and warm-up sweeps).
"""
import argparse
import json
import resource
import time

import peerinfo

peerinfo.use_best_core()  # before NumPy loads OpenBLAS

import numpy as np
import scipy
import scipy.fft
from scipy.signal import fftconvolve



def hat(a, th, ph, xi):
    c, s, cp, sp = np.cos(th), np.sin(th), np.cos(ph), np.sin(ph)
    R = np.array([[cp * c, -s, sp * c], [cp * s, c, sp * s], [-sp, 0, cp]])
    dd = np.array([(a * xi) ** 2, a * a, a * a])
    h = [int(np.ceil(np.sqrt(36 * np.sum(R[:, i] ** 2 * dd)) - 1e-9)) for i in range(3)]
    x, y, z = np.meshgrid(*[np.arange(-k, k + 1) for k in h], indexing="ij")
    rT = R[0, 0] * x + R[0, 1] * y + R[0, 2] * z
    rp = R[1, 0] * x + R[1, 1] * y + R[1, 2] * z
    rp2 = R[2, 0] * x + R[2, 1] * y + R[2, 2] * z
    q = (rp / a) ** 2 + (rT / (a * xi)) ** 2 + (rp2 / a) ** 2
    return (3 - q) * np.exp(-q / 2)


def parse_list(text):
    """Comma-separated numbers or START:STOP:COUNT (STOP excluded); pi allowed."""
    num = lambda t: float(eval(t, {"__builtins__": {}}, {"pi": np.pi}))  # noqa: E731
    if ":" in text:
        a, b, k = text.split(":")
        a, b, k = num(a), num(b), int(k)
        return [a + i * (b - a) / k for i in range(k)]
    return [num(t) for t in text.split(",")]


def stats(v, a, th, ph, xi, boundary):
    k = hat(a, th, ph, xi)
    h = [d // 2 for d in k.shape]
    vp = np.pad(v, [(e, e) for e in h], mode="symmetric" if boundary == "reflect" else "wrap")
    g = fftconvolve(vp, k.astype(v.dtype), mode="valid")
    g64 = g.astype(np.float64)
    return float((g64 ** 2).sum()), float(g64.std()), float(g64.max()), float((k ** 2).sum())


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--xi", default="2")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--volume", help="(X, Y, Z) .npy: run the sweep")
    p.add_argument("--theta", default="0:pi:4")
    p.add_argument("--phi", default="0:pi:2")
    p.add_argument("-a", type=float, default=1.0)
    p.add_argument("--boundary", default="reflect", choices=["reflect", "wrap"])
    p.add_argument("--out", help="with --volume: the statistics CSV")
    p.add_argument("--workers", type=int, default=peerinfo.cores(), help="FFT threads (default: all cores)")
    p.add_argument("--warmup", type=int, default=0, help="untimed sweeps (or combinations) before the timed one")
    args = p.parse_args()
    with scipy.fft.set_workers(args.workers):  # fftconvolve's FFTs go through scipy.fft
        run(args)


def run(args):
    rng = np.random.default_rng(1)
    times, rows = [], []
    if args.volume is None:
        v = rng.standard_normal((args.size,) * 3).astype(np.float32)
        for _ in range(args.warmup):
            fftconvolve(v, hat(1.0, 0.3, 0.5, float(args.xi)).astype(np.float32), mode="same")
        for _ in range(args.repeat):
            k = hat(1.0, rng.uniform(0, np.pi), rng.uniform(0, np.pi), float(args.xi)).astype(np.float32)
            t0 = time.perf_counter()
            g = fftconvolve(v, k, mode="same")
            e, sd, mx = float((g.astype(np.float64) ** 2).sum()), float(g.std()), float(g.max())
            times.append(time.perf_counter() - t0)
    else:
        v = np.load(args.volume).astype(np.float32)
        grid = [(th, ph, xi) for th in parse_list(args.theta) for ph in parse_list(args.phi)
                for xi in parse_list(args.xi)]
        for _ in range(args.warmup):
            for th, ph, xi in grid:
                stats(v, args.a, th, ph, xi, args.boundary)
        for th, ph, xi in grid:
            t0 = time.perf_counter()
            rows.append((th, ph, xi) + stats(v, args.a, th, ph, xi, args.boundary))
            times.append(time.perf_counter() - t0)
        if args.out:
            with open(args.out, "w") as f:
                f.write("theta,phi,xi,energy,std,max,wavelet_energy\n")
                for r in rows:
                    f.write(",".join(repr(x) for x in r) + "\n")
    print(json.dumps({"peer": "scipy-fftconvolve", "seconds": float(np.median(times)), "times": times,
                      "combinations": len(times),
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "config": {"library": f"SciPy {scipy.__version__}", "threads": scipy.fft.get_workers(),
                                 "warmup": args.warmup,
                                 "text": f"SciPy {scipy.__version__} fftconvolve (pocketfft), "
                                         f"{scipy.fft.get_workers()} FFT threads, {args.warmup} warm-up sweep"
                                         f"{'s' if args.warmup != 1 else ''}"}}))


if __name__ == "__main__":
    main()
