#!/usr/bin/env python3
"""The DRR case in JAX, for GPU machines: DRRs by trilinear ray sampling.

--variant original is the original loop: per pose, one jitted function sampling
every ray (raybyray) and a second turning the samples into the image
(image_process), called from Python, every image kept — the loop that got
slower with every iteration. --variant fix is the answer's fix: the two
fused in one jitted function and the poses mapped on the device with
jax.lax.map(batch_size=...).

Geometry and sampling are drr_numpy.py's (tapeloop's definitions: --orbit
poses, samples at the fractions (q + 1/2)·step/L of every ray, L the
length of the longest, zero outside the volume); a fixed sample count per
ray covers the volume's circumscribed sphere, samples outside contributing
zero. Prints one JSON line: seconds
per DRR (median over poses for seed, the whole batch / P for fix,
synchronised), peak device memory, checksum; --out writes (P, R, C).
"""
import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np


def poses(n_poses, c, sdd, sid):
    a = 2 * np.pi * np.arange(n_poses) / n_poses
    ca, sa, z = np.cos(a), np.sin(a), np.zeros(n_poses)
    src = c + sid * np.stack([ca, sa, z], 1)
    center = c - (sdd - sid) * np.stack([ca, sa, z], 1)
    u = np.stack([-sa, ca, z], 1)
    return src, center, u


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--volume", required=True)
    p.add_argument("--spacing", default="1,1,1")
    p.add_argument("--origin", default="0,0,0")
    p.add_argument("--orbit", type=int, default=64)
    p.add_argument("--sdd", type=float, default=1020)
    p.add_argument("--sid", type=float, default=510)
    p.add_argument("--detector", default="200x200")
    p.add_argument("--pixel", type=float, default=2)
    p.add_argument("--step", type=float, default=0)
    p.add_argument("--variant", choices=["original", "fix"], default="fix")
    p.add_argument("--batch", type=int, default=8, help="fix: poses per lax.map step")
    p.add_argument("--out")
    args = p.parse_args()
    v = np.load(args.volume).astype(np.float32)
    n = np.array(v.shape)
    s = np.array([float(t) for t in args.spacing.split(",")])
    o = np.array([float(t) for t in args.origin.split(",")])
    step = args.step or s.min() / 2
    rows, cols = (int(t) for t in args.detector.split("x"))
    c = o + (n - 1) * s / 2  # the box's centre, o the centre of voxel 0
    radius = np.linalg.norm(n * s) / 2
    lref = np.sqrt(args.sdd ** 2 + ((cols - 1) / 2 * args.pixel) ** 2 + ((rows - 1) / 2 * args.pixel) ** 2)
    frac = step / lref  # the longest ray, to a detector corner, has samples step mm apart
    # Every ray is between sdd and lref long: its points within the sphere
    # lie at fractions in [(sid - radius)/lref, (sid + radius)/sdd].
    q0 = int(np.floor((args.sid - radius) / lref / frac)) - 1
    nq = int(np.ceil((args.sid + radius) / args.sdd / frac)) - q0 + 3
    vp = jnp.asarray(np.pad(v, 1))
    cc, rr = np.meshgrid(np.arange(cols), np.arange(rows))
    du = jnp.asarray(((cc - (cols - 1) / 2) * args.pixel).ravel())
    dv = jnp.asarray(((rr - (rows - 1) / 2) * args.pixel).ravel())
    jo, js, jn = jnp.asarray(o), jnp.asarray(s), jnp.asarray(n)

    def raybyray(src, center, u):
        """(rays, nq) trilinear samples along every ray of one pose."""
        pix = center + du[:, None] * u + dv[:, None] * jnp.array([0.0, 0.0, -1.0])
        d = pix - src
        a = (q0 + jnp.arange(nq) + 0.5) * frac
        pts = src + a[None, :, None] * d[:, None, :]
        ui = (pts - jo) / js + 1  # continuous index in the padded volume
        i0 = jnp.floor(ui)
        t = ui - i0
        inside = jnp.all((ui >= 0) & (ui < jn + 1), axis=-1)
        i0 = jnp.clip(i0, 0, jn).astype(jnp.int32)
        val = 0.0
        for k in range(8):
            dx, dy, dz = k >> 2, (k >> 1) & 1, k & 1
            w = ((t[..., 0] if dx else 1 - t[..., 0]) * (t[..., 1] if dy else 1 - t[..., 1])
                 * (t[..., 2] if dz else 1 - t[..., 2]))
            val = val + w * vp[i0[..., 0] + dx, i0[..., 1] + dy, i0[..., 2] + dz]
        return jnp.where(inside, val, 0.0) * (frac * jnp.linalg.norm(d, axis=1))[:, None]

    def image_process(samples):
        return samples.sum(axis=1).reshape(rows, cols)

    src, center, u = (jnp.asarray(a) for a in poses(args.orbit, c, args.sdd, args.sid))
    times = []
    if args.variant == "original":
        ray_jit, img_jit = jax.jit(raybyray), jax.jit(image_process)
        images = []
        for k in range(args.orbit):
            t0 = time.perf_counter()
            images.append(img_jit(ray_jit(src[k], center[k], u[k])).block_until_ready())
            times.append(time.perf_counter() - t0)
        out = np.stack([np.asarray(im) for im in images])
        seconds = float(np.median(times[1:] or times))
    else:
        full = jax.jit(lambda a, b, e: jax.lax.map(lambda p: image_process(raybyray(*p)), (a, b, e),
                                                   batch_size=args.batch))
        full(src, center, u).block_until_ready()  # compile
        t0 = time.perf_counter()
        res = full(src, center, u).block_until_ready()
        seconds = (time.perf_counter() - t0) / args.orbit
        out = np.asarray(res)
    if args.out:
        np.save(args.out, out.astype(np.float32))
    stats = jax.local_devices()[0].memory_stats() or {}
    print(json.dumps({"peer": f"jax-{args.variant}", "seconds": seconds, "times": times,
                      "checksum": float(out.sum(dtype=np.float64)), "peak_device_bytes": stats.get("peak_bytes_in_use"),
                      "device": str(jax.local_devices()[0]), "jax": jax.__version__}))


if __name__ == "__main__":
    main()
