#!/usr/bin/env python3
"""DRRs by trilinear ray sampling in NumPy, pose by pose: a NumPy
reimplementation of tapeloop's own trilinear method, not a tool people use
to render DRRs (that peer is plastimatch: drr_plastimatch.py). It stays as
the check that matches tapeloop's sampling exactly, element by element, and
as what the same computation costs in array code.

The original case's JAX loop (raybyray, then image_process, per iteration) rendered
one radiograph per call; its answer's fix fuses the two into one jitted
function and loops on the device. On the CPU the same computation in NumPy
is this: for each pose, all rays at once, the samples taken in lockstep
(sample k of every ray), trilinear interpolation with zero outside the
volume. Geometry and sampling follow tapeloop's definitions exactly (the
--orbit poses; samples at the fractions (q + 1/2)·step/L of every ray
from the source, L the length of the pose's longest ray (to a detector
corner), inside the volume's box grown by half a voxel, each weighing
step·len/L; voxel centres at o + i·s, o the centre of voxel 0 as
tapeloop's --origin), so the images can be compared element by element.

Prints one JSON line: median seconds per DRR, peak RSS, checksum and
"config" (NumPy's version; one thread: element-wise arithmetic and gathers,
no BLAS); writes the (P, R, C) float32 images to --out when given.
"""
import argparse
import json
import resource
import time

import peerinfo

peerinfo.use_best_core()  # before NumPy loads OpenBLAS

import numpy as np


def orbit(n_poses, c, sdd, sid, rows, cols, pixel):
    for k in range(n_poses):
        a = 2 * np.pi * k / n_poses
        ca, sa = np.cos(a), np.sin(a)
        src = c + sid * np.array([ca, sa, 0.0])
        center = c - (sdd - sid) * np.array([ca, sa, 0.0])
        u, v = np.array([-sa, ca, 0.0]), np.array([0.0, 0.0, -1.0])
        cc, rr = np.meshgrid(np.arange(cols), np.arange(rows))
        pix = (center + ((cc - (cols - 1) / 2) * pixel)[..., None] * u
               + ((rr - (rows - 1) / 2) * pixel)[..., None] * v)
        yield src, pix.reshape(-1, 3)


def drr(vp, n, o, s, src, pix, step):
    """Line integrals from src to each row of pix through the zero-padded
    volume vp ((n+2)³ flattened): the sum of trilinear samples, each
    weighing its ray's sample spacing."""
    d = pix - src
    length = np.linalg.norm(d, axis=1)
    frac = step / length.max()  # the detector's corners are among the pixels
    lo, hi = o - s, o + n * s  # the data's box, o - s/2 to o + (n - 1/2)·s, grown by half a voxel
    amin, amax = np.zeros(len(d)), np.ones(len(d))
    for ax in range(3):
        da = d[:, ax]
        with np.errstate(divide="ignore", invalid="ignore"):
            t0, t1 = (lo[ax] - src[ax]) / da, (hi[ax] - src[ax]) / da
        par = da == 0
        inside = (src[ax] >= lo[ax]) & (src[ax] < hi[ax])
        t0 = np.where(par, np.where(inside, -np.inf, np.inf), t0)
        t1 = np.where(par, np.where(inside, np.inf, -np.inf), t1)
        amin = np.maximum(amin, np.minimum(t0, t1))
        amax = np.minimum(amax, np.maximum(t0, t1))
    hit = amin < amax
    q0 = np.ceil(amin / frac - 0.5)
    q1 = np.floor(amax / frac - 0.5)
    q1 = np.where(hit, q1, q0 - 1)
    acc = np.zeros(len(d))
    stride = np.array([(n[1] + 2) * (n[2] + 2), n[2] + 2, 1])
    for k in range(int(max(0, (q1 - q0).max() + 1))):
        q = q0 + k
        live = np.nonzero(q <= q1)[0]
        if len(live) == 0:
            break
        a = (q[live] + 0.5) * frac
        p = src + a[:, None] * d[live]
        u = (p - o) / s + 1  # continuous index in the padded volume
        i0 = np.clip(np.floor(u), 0, n)  # n per axis: the last valid corner
        t = u - i0
        base = (i0.astype(np.int64) * stride).sum(axis=1)
        val = np.zeros(len(live))
        for dx in (0, 1):
            wx = t[:, 0] if dx else 1 - t[:, 0]
            for dy in (0, 1):
                wy = t[:, 1] if dy else 1 - t[:, 1]
                for dz in (0, 1):
                    wz = t[:, 2] if dz else 1 - t[:, 2]
                    val += wx * wy * wz * vp[base + dx * stride[0] + dy * stride[1] + dz]
        acc[live] += val
    return acc * frac * length


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--volume", required=True, help="(X, Y, Z) .npy")
    p.add_argument("--spacing", default="1,1,1")
    p.add_argument("--origin", default="0,0,0")
    p.add_argument("--orbit", type=int, default=8)
    p.add_argument("--sdd", type=float, default=1020)
    p.add_argument("--sid", type=float, default=510)
    p.add_argument("--detector", default="200x200")
    p.add_argument("--pixel", type=float, default=2)
    p.add_argument("--step", type=float, default=0)
    p.add_argument("--out")
    args = p.parse_args()
    v = np.load(args.volume).astype(np.float64)
    n = np.array(v.shape)
    s = np.array([float(x) for x in args.spacing.split(",")])
    o = np.array([float(x) for x in args.origin.split(",")])
    step = args.step or s.min() / 2
    rows, cols = (int(x) for x in args.detector.split("x"))
    vp = np.pad(v, 1).ravel()
    c = o + (n - 1) * s / 2  # the box's centre
    images, times = [], []
    for src, pix in orbit(args.orbit, c, args.sdd, args.sid, rows, cols, args.pixel):
        t0 = time.perf_counter()
        images.append(drr(vp, n, o, s, src, pix, step).reshape(rows, cols).astype(np.float32))
        times.append(time.perf_counter() - t0)
    out = np.stack(images)
    if args.out:
        np.save(args.out, out)
    print(json.dumps({
        "peer": "numpy-trilinear",
        "seconds": float(np.median(times)),
        "times": times,
        "checksum": float(out.sum(dtype=np.float64)),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "numpy": np.__version__,
        "config": {"library": f"NumPy {np.__version__}", "threads": 1,
                   "text": f"NumPy {np.__version__} reimplementation, pose by pose, 1 thread"},
    }))


if __name__ == "__main__":
    main()
