#!/usr/bin/env python3
"""Exact k nearest neighbours of N flattened images with FAISS, the field's
usual library for it: the peer of `tapeloop affinity --topk K`.

--metric dot searches an IndexFlatIP (largest x_i·x_j), --metric l2 an
IndexFlatL2 (smallest squared distance; tapeloop's l2 affinity is its
negative, −Σ(x_i − x_j)², so the values written are negated to match). Both
indexes are exact brute force: FAISS computes the distances in blocks with
BLAS sgemm and keeps the best per query in heaps, on --threads OpenMP
threads. Every image is also a query; tapeloop's top-k leaves each image
out of its own list, so FAISS is asked for K + 1 and the image itself is
dropped (or, where it is not among them, the (K + 1)-th).

The time covers building the index (a copy of the data), the search and
dropping the self matches: everything after loading --images. Prints one
JSON line: median seconds over --repeat runs, peak RSS and "config": FAISS's
version and OpenMP threads, and the OpenBLAS core and threads this process
actually loaded (set OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS before
running it, as bench/compare.py does). --out writes indices and values as
tapeloop's top-k .npz holds them: (N, K) int64 and float32, best first.
"""
import argparse
import json
import resource
import time

import peerinfo

peerinfo.use_best_core()  # before NumPy loads OpenBLAS

import numpy as np



def knn(x, metric, k):
    import faiss
    index = faiss.IndexFlatIP(x.shape[1]) if metric == "dot" else faiss.IndexFlatL2(x.shape[1])
    index.add(x)
    dist, idx = index.search(x, k + 1)
    own = idx == np.arange(len(x))[:, None]
    keep = ~own
    keep[~own.any(axis=1), -1] = False  # rows whose own image is not in the K + 1: drop the last
    idx = idx[keep].reshape(len(x), k)
    dist = dist[keep].reshape(len(x), k)
    return idx.astype(np.int64), (dist if metric == "dot" else -dist).astype(np.float32)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--images", required=True, help="(N, H, W) or (N, D) .npy")
    p.add_argument("--metric", default="dot", choices=["dot", "l2"])
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--threads", type=int, default=peerinfo.cores(), help="OpenMP threads (default: all cores)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--out", help="write indices and values to this .npz")
    args = p.parse_args()
    import faiss
    faiss.omp_set_num_threads(args.threads)
    x = np.load(args.images)
    x = np.ascontiguousarray(x.reshape(len(x), -1), dtype=np.float32)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        idx, val = knn(x, args.metric, args.k)
        times.append(time.perf_counter() - t0)
    if args.out:
        np.savez(args.out, indices=idx, values=val)
    blas = peerinfo.openblas()
    omp = faiss.omp_get_max_threads()
    index = "IndexFlatIP" if args.metric == "dot" else "IndexFlatL2"
    print(json.dumps({
        "peer": "faiss-" + index,
        "seconds": float(np.median(times)),
        "times": times,
        "checksum": float(val.sum(dtype=np.float64)),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "config": {"library": f"FAISS {faiss.__version__}", "blas": blas, "threads": omp,
                   "text": f"FAISS {faiss.__version__} {index}, {omp} OpenMP threads; "
                           f"{peerinfo.describe_blas(blas)}"},
    }))


if __name__ == "__main__":
    main()
