#!/usr/bin/env python3
"""Pairwise affinities of N flattened images in NumPy/SciPy.

dot is `x @ x.T` (NumPy hands a product of a matrix with its own transpose to
BLAS syrk, computing each pair once); l1 is SciPy's cdist(cityblock), negated;
cosine and l2 as their definitions. The images are standard normal with a
fixed seed (not the same stream as tapeloop's: compare times, and checksums
only statistically), or read from --images, the same file tapeloop reads.

dot and cosine run on OpenBLAS, whose speed depends on the kernels it loaded:
run this script with OPENBLAS_CORETYPE set to the CPU's real family and
OPENBLAS_NUM_THREADS to its cores (bench/compare.py does). l1 and l2 run in
SciPy's cdist, one thread. Prints one JSON line: median seconds over
--repeat runs, the checksum (sum of the matrix), peak RSS, versions, and
"config": the library, the OpenBLAS core and thread count this process
actually loaded (asked from the library itself).
"""
import argparse
import json
import resource
import time

import peerinfo

peerinfo.use_best_core()  # before NumPy loads OpenBLAS

import numpy as np



def affinity(x, metric):
    if metric == "dot":
        return x @ x.T
    if metric == "cosine":
        n = np.linalg.norm(x, axis=1)
        return (x @ x.T) / n[:, None] / n[None, :]
    from scipy.spatial.distance import cdist
    if metric == "l1":
        return -cdist(x, x, "cityblock")
    return -cdist(x, x, "sqeuclidean")


def config(metric):
    """What computed the matrix, as loaded in this process."""
    blas = peerinfo.openblas()
    if metric in ("dot", "cosine"):
        return {"library": f"NumPy {np.__version__}", "blas": blas, "threads": blas and blas["threads"],
                "text": f"NumPy {np.__version__}, {peerinfo.describe_blas(blas)}"}
    import scipy
    return {"library": f"SciPy {scipy.__version__} cdist", "blas": None, "threads": 1,
            "text": f"SciPy {scipy.__version__} cdist, 1 thread"}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--d", type=int, default=10_000)
    p.add_argument("--metric", default="dot")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--images", help="(N, H, W) or (N, D) .npy (else standard normal (n, d) float32)")
    p.add_argument("--out", help="write the (N, N) matrix to this .npy")
    args = p.parse_args()
    if args.images:
        x = np.load(args.images)
        x = x.reshape(len(x), -1).astype(np.float32 if x.dtype.itemsize <= 4 else np.float64)
    else:
        x = np.random.default_rng(1).standard_normal((args.n, args.d), dtype=np.float32)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        a = affinity(x, args.metric)
        times.append(time.perf_counter() - t0)
    if args.out:
        np.save(args.out, a)
    print(json.dumps({
        "peer": "numpy" if args.metric in ("dot", "cosine") else "scipy-cdist",
        "seconds": float(np.median(times)),
        "times": times,
        "checksum": float(a.sum(dtype=np.float64)),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "numpy": np.__version__,
        "config": config(args.metric),
    }))


if __name__ == "__main__":
    main()
