#!/usr/bin/env python3
"""Chunked NumPy evaluation of the interpolation case: M cubic interpolants on a shared grid
at N query points, reduced per query by sum of squares.

This is the usual recommended fix (evaluate in batches so that no
(N, M) array exists) written in NumPy, with the original case's exact semantics. It
prints one JSON line: median seconds per sweep over --repeat sweeps, peak RSS,
the checksum (sum over all queries), for comparison with tapeloop, and
"config": NumPy's version and threads. The work is NumPy element-wise
arithmetic and einsum contractions over 4 weights, which NumPy runs on one
thread without BLAS, so there is no thread or BLAS setting to tune.
"""
import argparse
import json
import resource
import time

import peerinfo

peerinfo.use_best_core()  # before NumPy loads OpenBLAS

import numpy as np

A = np.array([-1 / 16, 9 / 16, 9 / 16, -1 / 16])
B = np.array([1 / 24, -9 / 8, 9 / 8, -1 / 24])
C = np.array([1 / 4, -1 / 4, -1 / 4, 1 / 4])
D = np.array([-1 / 6, 1 / 2, -1 / 2, 1 / 6])


def sweep(fp, a, dx, x, chunk, dtype, out=None):
    G = fp.shape[1] - 2
    ub = a + (G + 1) * dx
    total = 0.0
    for lo in range(0, len(x), chunk):
        xs = x[lo:lo + chunk]
        xc = np.clip(xs, a, ub) - a
        ix = np.floor(xc / dx)
        t = (xc / dx - (ix + 0.5))[:, None]
        w = (A + t * (B + t * (C + t * D))).astype(dtype)
        start = np.clip(ix.astype(np.int64), 0, G - 2)
        cols = fp[:, start[:, None] + np.arange(4)]      # (M, chunk, 4)
        vals = np.einsum("mck,ck->cm", cols, w)           # (chunk, M)
        if out is not None:
            out[lo:lo + chunk] = np.einsum("cm,cm->c", vals, vals, dtype=np.float64)
        total += float(np.einsum("cm,cm->", vals, vals, dtype=np.float64))
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--interpolants", type=int, default=300)
    p.add_argument("--grid", type=int, default=4096)
    p.add_argument("--points", type=int, default=1_000_000)
    p.add_argument("--chunk", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--f", help="(M, G) .npy of interpolant values (else f = g² on [0, 1])")
    p.add_argument("--x", help="(N,) .npy of query points (else uniform on [0, 1])")
    p.add_argument("-a", type=float, default=0.0, help="grid origin")
    p.add_argument("--dx", type=float, default=0.0, help="grid spacing (default 1/(G-1))")
    p.add_argument("--out", help="write the per-query sums of squares to this .npy")
    args = p.parse_args()
    dtype = np.dtype(args.dtype)
    if args.f:
        f = np.load(args.f)
    else:
        g = np.linspace(0, 1, args.grid)
        f = np.repeat((g ** 2)[None, :], args.interpolants, axis=0)
    fp = np.pad(f, ((0, 0), (1, 1))).astype(dtype)
    if args.x:
        x = np.load(args.x).astype(np.float64)
    else:
        x = np.random.default_rng(1).uniform(0, 1, args.points).astype(dtype).astype(np.float64)
    dx = args.dx or 1 / (f.shape[1] - 1)
    out = np.empty(len(x)) if args.out else None
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        s = sweep(fp, args.a, dx, x, args.chunk, dtype, out)
        times.append(time.perf_counter() - t0)
    if args.out:
        np.save(args.out, out)
    print(json.dumps({
        "peer": "numpy-chunked",
        "seconds": float(np.median(times)),
        "times": times,
        "checksum": s,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "numpy": np.__version__,
        "config": {"library": f"NumPy {np.__version__}", "threads": 1,
                   "text": f"NumPy {np.__version__}, chunks of {args.chunk}, 1 thread (no BLAS)"},
    }))


if __name__ == "__main__":
    main()
