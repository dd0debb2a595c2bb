#!/usr/bin/env python3
"""DRRs with `plastimatch drr`, the field's own command-line renderer: the
peer of `tapeloop drr --orbit P` on the same MetaImage volume.

--algorithm exact is plastimatch's exact radiological path (the peer of
tapeloop's --method siddon), uniform its evenly spaced trilinear samples
(the peer of --method trilinear; plastimatch chooses its own step, so the
images agree less closely). No HU conversion (-P none): the voxel values
are attenuations per mm, and plastimatch integrates in cm, so its images
are multiplied by 10 to compare with tapeloop's, in mm.

Geometry, mapped from tapeloop's orbit (P poses about the z axis through
the volume's centre c, pose k at the angle a = 2πk/P: source at
c + sid·(cos a, sin a, 0), detector centre at c − (sdd − sid)·(cos a, sin a, 0),
columns along (−sin a, cos a, 0), rows along −z): isocenter -o c, --sad sid,
--sid sdd, gantry angles −a (plastimatch turns the other way round), -r and
-z as "columns rows" (the order plastimatch 1.9.4 reads them in, whatever its
help says). plastimatch ignores direction cosines, so the volume must have
an identity direction; and it puts the box's faces at the outer voxels'
centres, not half a voxel further out, so give it a volume whose outer
layer of voxels is zero (then both conventions integrate the same).

plastimatch 1.9.4 renders one DRR at a time on one thread (OpenMP settings
change nothing: its CPU use stays at one core). To use the machine as a
user would, the P poses are shared among --processes concurrent plastimatch
processes, process j rendering poses j, j + n, j + 2n … (its first gantry
angle, which this version reads in radians while the spacing is in
degrees, and then every 360·n/P degrees). The time is plastimatch's own
"Total time" of its render loop (after loading the volume), the longest
among the processes, divided by P: seconds per DRR with all processes
running at once. Each process's CPU use (user + system time over wall
time, from wait4) is reported, showing the threads it really used.

Prints one JSON line: seconds per DRR, plastimatch's version, the CPU use
per process; --out writes the (P, R, C) float32 images in mm.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import peerinfo


def mha_centre(path):
    """The centre of a MetaImage volume's voxel grid, from its header."""
    head = {}
    with open(path, "rb") as f:
        for raw in f:
            key, _, value = raw.decode("latin-1").partition("=")
            head[key.strip()] = value.strip()
            if key.strip() == "ElementDataFile":
                break
    if head.get("TransformMatrix", "1 0 0 0 1 0 0 0 1").split() != "1 0 0 0 1 0 0 0 1".split():
        sys.exit("drr_plastimatch: plastimatch ignores direction cosines: give it an identity-direction volume")
    off = np.array(head["Offset"].split(), float)
    sp = np.array(head["ElementSpacing"].split(), float)
    n = np.array(head["DimSize"].split(), float)
    return off + (n - 1) / 2 * sp


def version(pm):
    out = subprocess.run([pm, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"\d+\.\d+(\.\d+)?", out)
    return m.group(0) if m else "?"


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--volume", required=True, help="an identity-direction .mha volume")
    p.add_argument("--algorithm", default="exact", choices=["exact", "uniform"])
    p.add_argument("--orbit", type=int, default=8)
    p.add_argument("--sdd", type=float, default=1020)
    p.add_argument("--sid", type=float, default=510)
    p.add_argument("--detector", default="200x200", help="RxC pixels")
    p.add_argument("--pixel", type=float, default=2)
    p.add_argument("--processes", type=int, default=peerinfo.cores(), help="concurrent plastimatch processes")
    p.add_argument("--plastimatch", default="plastimatch")
    p.add_argument("--out", help="write the (P, R, C) float32 images, in mm, to this .npy")
    args = p.parse_args()
    rows, cols = (int(x) for x in args.detector.split("x"))
    c = mha_centre(args.volume)
    P, n = args.orbit, max(1, min(args.processes, args.orbit))
    with tempfile.TemporaryDirectory(prefix="drr-plastimatch-") as d:
        procs = []
        for j in range(n):
            count = len(range(j, P, n))
            cmd = [args.plastimatch, "drr", "-A", "cpu", "-i", args.algorithm, "-P", "none", "-t", "raw",
                   "-r", f"{cols} {rows}", "-z", f"{cols * args.pixel:.17g} {rows * args.pixel:.17g}",
                   "--sad", f"{args.sid:.17g}", "--sid", f"{args.sdd:.17g}",
                   "-o", " ".join(f"{x:.17g}" for x in c),
                   "-y", f"{-2 * np.pi * j / P:.17g}",  # radians
                   "-N", f"{-360 * n / P:.17g}",  # degrees
                   "-a", str(count), "-O", os.path.join(d, f"p{j}_"), args.volume]
            procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT), time.perf_counter()))
        totals, cpu_use = [], []
        for proc, t0 in procs:
            out = proc.stdout.read().decode()
            _, status, ru = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit(f"drr_plastimatch: plastimatch drr failed:\n{out}")
            m = re.search(r"Total time:\s*([0-9.eE+-]+)", out)
            if not m:
                sys.exit(f"drr_plastimatch: no 'Total time' in plastimatch's output:\n{out}")
            totals.append(float(m.group(1)))
            cpu_use.append((ru.ru_utime + ru.ru_stime) / wall)
        images = np.empty((P, rows, cols), np.float32)
        for k in range(P):
            j, i = k % n, k // n
            raw = np.fromfile(os.path.join(d, f"p{j}_{i:04d}.raw"), np.float32)
            images[k] = 10 * raw.reshape(rows, cols)  # cm to mm
    if args.out:
        np.save(args.out, images)
    ver = version(args.plastimatch)
    print(json.dumps({
        "peer": f"plastimatch-{args.algorithm}",
        "seconds": max(totals) / P,
        "render_seconds": totals,
        "cpu_use": cpu_use,
        "checksum": float(images.sum(dtype=np.float64)),
        "config": {"library": f"plastimatch {ver}", "threads": 1, "processes": n,
                   "text": f"plastimatch {ver} drr -i {args.algorithm}, {n} process{'es' if n != 1 else ''} "
                           f"× 1 thread (CPU use per process {max(cpu_use):.2f})"},
    }))


if __name__ == "__main__":
    main()
