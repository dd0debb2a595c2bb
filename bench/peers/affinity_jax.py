#!/usr/bin/env python3
"""Pairwise affinities of N flattened images in JAX, for GPU machines.

--variant original is the original code: a pair function vmapped over both
images, so the (N, N, D) differences are materialised (O(N²·D) memory).
--variant fix is the blocked form: one jitted function mapping over rows
with jax.lax.map(batch_size=...), (block, N, D) at a time; dot is x @ x.T
(--tf32 lets the GPU use TF32).

Same inputs as affinity_numpy.py and `tapeloop affinity --images`. Prints
one JSON line: median seconds (synchronised), peak device memory,
checksum; --out writes the (N, N) matrix.
"""
import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np


def pair(a, b, metric):
    if metric == "l1":
        return -jnp.sum(jnp.abs(a - b))
    if metric == "l2":
        return -jnp.sum((a - b) ** 2)
    return jnp.dot(a, b)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--images", required=True)
    p.add_argument("--metric", default="dot", choices=["dot", "l1", "l2"])
    p.add_argument("--variant", choices=["original", "fix"], default="fix")
    p.add_argument("--block", type=int, default=64, help="fix: rows per lax.map step")
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out")
    args = p.parse_args()
    x = np.load(args.images)
    x = jnp.asarray(x.reshape(len(x), -1).astype(np.float32))
    prec = "tensorfloat32" if args.tf32 else "highest"
    if args.variant == "original":
        f = jax.vmap(jax.vmap(lambda a, b: pair(a, b, args.metric), in_axes=(None, 0)), in_axes=(0, None))
        run = lambda: f(x, x)  # noqa: E731
    elif args.metric == "dot":
        g = jax.jit(lambda v: jnp.matmul(v, v.T, precision=prec))
        run = lambda: g(x)  # noqa: E731
    else:
        row = lambda r: jax.vmap(lambda b: pair(r, b, args.metric))(x)  # noqa: E731
        g = jax.jit(lambda v: jax.lax.map(row, v, batch_size=args.block))
        run = lambda: g(x)  # noqa: E731
    out = run().block_until_ready()
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        out = run().block_until_ready()
        times.append(time.perf_counter() - t0)
    res = np.asarray(out)
    if args.out:
        np.save(args.out, res)
    stats = jax.local_devices()[0].memory_stats() or {}
    print(json.dumps({"peer": f"jax-{args.variant}", "seconds": float(np.median(times)), "times": times,
                      "checksum": float(res.sum(dtype=np.float64)), "peak_device_bytes": stats.get("peak_bytes_in_use"),
                      "device": str(jax.local_devices()[0]), "jax": jax.__version__}))


if __name__ == "__main__":
    main()
