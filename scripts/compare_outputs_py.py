#!/usr/bin/env python3
"""Helper of scripts/compare-outputs.sh (a before/after output sweep).

  compare_outputs_py.py inputs DIR     write the sweep's fixed-seed inputs into DIR
  compare_outputs_py.py python OUT IN  call the Python package (import tapeloop from
                                       PYTHONPATH) on fixed-seed inputs; write one line
                                       per result, inputs from IN (sha256 of its bytes, shape, dtype, a
                                       sum) and the messages of a few refused calls to OUT
  compare_outputs_py.py npzsum LIST…   LIST: CASE.npz, naming .npz files one a line; one
                                       line per member of each: "@@ CASE FILE:MEMBER: dtype
                                       shape sha256" (a readable companion of the files' own
                                       sha256)

Needs NumPy (Debian: python3-numpy). Nothing here depends on the time, the
paths or the machine's memory: run twice, it writes the same bytes.
"""
import hashlib
import json
import os
import struct
import sys
import warnings

import numpy as np

SEED = 20240611


def _nifti(path, vol, spacing, origin):
    """A minimal NIfTI-1 .nii of a float32 (X, Y, Z) volume, sform = diag(spacing) + origin."""
    vol = np.asarray(vol, np.float32)
    hdr = bytearray(348)
    struct.pack_into("<i", hdr, 0, 348)
    struct.pack_into("<8h", hdr, 40, 3, *vol.shape, 1, 1, 1, 1)
    struct.pack_into("<hh", hdr, 70, 16, 32)  # datatype FLOAT32, bitpix
    struct.pack_into("<8f", hdr, 76, 1.0, *spacing, 1, 1, 1, 1)
    struct.pack_into("<f", hdr, 108, 352.0)  # vox_offset
    struct.pack_into("<f", hdr, 112, 1.0)  # scl_slope
    hdr[123] = 2  # mm
    struct.pack_into("<hh", hdr, 252, 0, 1)  # qform_code 0, sform_code 1 (scanner)
    sx, sy, sz = spacing
    ox, oy, oz = origin
    struct.pack_into("<4f", hdr, 280, sx, 0, 0, ox)
    struct.pack_into("<4f", hdr, 296, 0, sy, 0, oy)
    struct.pack_into("<4f", hdr, 312, 0, 0, sz, oz)
    hdr[344:348] = b"n+1\0"
    with open(path, "wb") as f:
        f.write(bytes(hdr) + b"\0\0\0\0" + vol.tobytes(order="F"))


def _mha(path, vol, spacing, origin):
    vol = np.asarray(vol, np.float32)
    head = ("ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
            "TransformMatrix = 1 0 0 0 1 0 0 0 1\n"
            f"Offset = {origin[0]} {origin[1]} {origin[2]}\n"
            f"ElementSpacing = {spacing[0]} {spacing[1]} {spacing[2]}\n"
            f"DimSize = {vol.shape[0]} {vol.shape[1]} {vol.shape[2]}\n"
            "ElementType = MET_FLOAT\nElementDataFile = LOCAL\n")
    with open(path, "wb") as f:
        f.write(head.encode() + vol.tobytes(order="F"))


def inputs(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(SEED)
    p = lambda name: os.path.join(d, name)  # noqa: E731
    # interp: M = 6 interpolants on G = 40 points, N = 3000 queries in [0, 1)
    g = np.linspace(0, 1, 40)
    f = np.stack([np.sin((k + 1) * 3 * g) + 0.1 * k for k in range(6)])
    np.save(p("f.npy"), f)
    np.save(p("f32.npy"), f.astype(np.float32))
    np.save(p("x.npy"), rng.random(3000))
    np.save(p("x32.npy"), rng.random(3000).astype(np.float32))
    # affinity: images
    np.save(p("images.npy"), rng.standard_normal((40, 6, 5)).astype(np.float32))
    np.save(p("images64_2d.npy"), rng.standard_normal((25, 16)))
    np.save(p("images_u8.npy"), rng.integers(0, 256, (30, 4, 4), dtype=np.uint8))
    np.save(p("images_i16.npy"), rng.integers(-300, 300, (20, 12), dtype=np.int16))
    # volumes for drr and wavelet
    vol = rng.random((12, 10, 8)).astype(np.float32)
    vol[3:9, 2:8, 2:6] += 2.0
    np.save(p("vol.npy"), vol)
    np.save(p("vol64.npy"), vol.astype(np.float64))
    hu = (rng.integers(-1000, 1500, (10, 9, 8))).astype(np.int16)
    np.save(p("vol_hu.npy"), hu)
    hu.tofile(p("vol_hu.raw"))  # C order, little endian int16
    _nifti(p("vol.nii"), vol, (1.5, 1.0, 2.0), (-8.0, -5.0, -7.0))
    _mha(p("vol.mha"), vol, (1.0, 1.25, 1.5), (-5.5, -5.5, -5.0))
    # drr geometry: two poses, 9x11 detector
    poses = []
    for ang in (0.3, 1.9):
        c, s = np.cos(ang), np.sin(ang)
        poses.append({"source": [400 * c, 400 * s, 1.0], "center": [-300 * c, -300 * s, 0.0],
                      "u": [-s, c, 0.0], "v": [0.0, 0.0, 1.0], "rows": 9, "cols": 11, "pixel": [1.5, 1.25]})
    with open(p("geom.json"), "w") as fh:
        json.dump({"poses": poses}, fh)
    # bad inputs
    with open(p("garbage.npy"), "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00garbage that is not a header")
    np.save(p("one_d.npy"), np.arange(10.0))
    np.save(p("f_with_nan.npy"), np.where(np.arange(40) == 5, np.nan, 1.0)[None, :].repeat(3, 0))
    np.save(p("complex.npy"), np.ones((4, 4), np.complex64))
    with open(p("geom_bad.json"), "w") as fh:
        fh.write('{"poses": [{"source": [0, 0, 1], "center": [0, 0, 0]}]}')
    with open(p("geom_trailing.json"), "w") as fh:
        json.dump({"poses": poses}, fh)
        fh.write(" {}")


def digest(a):
    a = np.ascontiguousarray(a)
    return hashlib.sha256(a.tobytes()).hexdigest()[:32]


class Recorder:
    def __init__(self, path, error):
        self.fh = open(path, "w")
        self.error = error  # tapeloop.Error, named so whatever module defines it

    def put(self, name, value):
        if isinstance(value, dict):
            for k in value:
                self.put(f"{name}[{k}]", value[k])
            return
        if isinstance(value, tuple):
            for i, v in enumerate(value):
                self.put(f"{name}[{i}]", v)
            return
        if isinstance(value, np.ndarray):
            s = float(np.nansum(value.astype(np.float64))) if value.size else 0.0
            self.fh.write(f"{name}: {value.dtype} {value.shape} sha256:{digest(value)} sum={s!r}\n")
        else:
            self.fh.write(f"{name}: {value!r}\n")

    def call(self, name, fn):
        """Run fn(); record its result, or its exception's type and message."""
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            try:
                r = fn()
            except Exception as e:  # noqa: BLE001 - every failure is a result here
                kind = "tapeloop.Error" if isinstance(e, self.error) else type(e).__name__
                self.fh.write(f"{name}: raised {kind}: {e}\n")
                r = None
            else:
                self.put(name, r)
        for w in ws:
            self.fh.write(f"{name}: warning {w.category.__name__}: {w.message}\n")


def report_of(obj):
    """The stable part of an object's report(): calls and the plan (no times, no RSS)."""
    r = obj.report()
    plan = r.get("plan", {})
    keep = {k: plan[k] for k in sorted(plan) if k not in ("mem_limit_bytes", "baseline_rss_bytes", "estimated_peak_rss_bytes")}
    return json.dumps({"calls": r.get("calls"), "plan": keep}, sort_keys=True)


def python_sweep(out, d):
    import tapeloop as tl

    R = Recorder(out, tl.Error)
    ld = lambda n: np.load(os.path.join(d, n))  # noqa: E731
    f, x64, x32 = ld("f.npy"), ld("x.npy"), ld("x32.npy")
    R.put("version", tl.version())
    R.put("all", sorted(tl.__all__))
    ML = "256MiB"

    # interp, one-shot
    for dt in ("float32", "float64"):
        x = x32 if dt == "float32" else x64
        for red in ("sumsq", "sum", "none"):
            R.call(f"interp {dt} {red}", lambda: tl.interp(f, x, reduce=red, dtype=dt, mem_limit=ML))
        R.call(f"interp {dt} direct", lambda: tl.interp(f, x, reduce="sumsq", method="direct", dtype=dt, mem_limit=ML))
        R.call(f"interp {dt} formula", lambda: tl.interp(f, x, reduce="mean(exp(-k*v))", params={"k": 1.5},
                                                         dtype=dt, mem_limit=ML))
        R.call(f"interp {dt} a dx", lambda: tl.interp(f, x * 0.5 + 0.2, a=0.1, dx=0.03, dtype=dt, mem_limit=ML))
    # interp, compiled once, called many times, out=
    def interp_obj():
        res = {}
        with tl.Interp(f, batch=256, reduce="max(v)", dtype="float64") as r:
            res["batch"], res["cols"] = r.batch, r.cols
            res["first"] = r(x64)
            res["second"] = r(x64[:1000])
            buf = np.empty(1000, np.float64)
            res["out_is_buf"] = r(x64[1000:2000], out=buf) is buf
            res["out"] = buf
            res["strided"] = r(x64[::3])
            res["report"] = report_of(r)
            res["dot_sha"] = hashlib.sha256(r.dot().encode()).hexdigest()[:32]
        return res
    R.call("Interp object", interp_obj)

    # affinity
    X = ld("images.npy")
    for dt in ("float32", "float64"):
        Xd = X.astype(dt)
        for m in ("dot", "cosine", "l1", "l2"):
            R.call(f"affinity {dt} {m}", lambda: tl.affinity(Xd, metric=m, dtype=dt, mem_limit=ML))
        for meth in ("auto", "direct"):
            R.call(f"affinity {dt} formula {meth}",
                   lambda: tl.affinity(Xd, formula="exp(-sum((a-b)^2)/(2*s^2))", params={"s": 4}, method=meth,
                                       dtype=dt, mem_limit=ML))
        R.call(f"affinity {dt} topk", lambda: tl.affinity(Xd, metric="cosine", topk=4, dtype=dt, mem_limit=ML))
        R.call(f"affinity {dt} block", lambda: tl.affinity(Xd, metric="l2", block=7, dtype=dt))
    R.call("affinity uint8 input", lambda: tl.affinity(ld("images_u8.npy"), metric="l1", mem_limit=ML))

    def affinity_obj():
        res = {}
        A = X.reshape(40, -1)
        with tl.Affinity("dot", shape=(20, 30), dtype="float32", block=6) as r:
            res["a"] = r(A[:20])
            out = np.empty((20, 20), np.float32)
            res["out_is_buf"] = r(A[20:], out=out) is out
            res["out"] = out
            res["report"] = report_of(r)
            res["dot_sha"] = hashlib.sha256(r.dot().encode()).hexdigest()[:32]
        with tl.Affinity("l1", shape=(10, 30), cols=15, dtype="float64") as r:
            res["cols"] = r(A[:10].astype(np.float64), A[10:25].astype(np.float64))
        with tl.Affinity(formula="-sum(abs(a-b))", shape=(40, 30), topk=3, dtype="float32") as r:
            res["topk"] = r(A)
        return res
    R.call("Affinity object", affinity_obj)

    # drr
    vol = ld("vol.npy")
    R.call("drr orbit siddon", lambda: tl.drr(vol, (1.0, 1.5, 2.0), (-5, -6, -7), orbit=3, detector=(10, 12),
                                              sdd=600, sid=300, pixel=1.5, mem_limit=ML))
    R.call("drr orbit trilinear", lambda: tl.drr(vol, orbit=3, detector=(10, 12), method="trilinear", step=0.6,
                                                 pixel=1.5, mem_limit=ML))
    R.call("drr hu", lambda: tl.drr(ld("vol_hu.npy"), orbit=2, detector=(8, 8), hu=True, mu_water=0.025,
                                    pixel=1.5, mem_limit=ML))
    R.call("drr mu post", lambda: tl.drr(vol, orbit=2, detector=(8, 8), mu="k*h", post="1-exp(-p)",
                                         params={"k": 0.1}, pixel=1.5, mem_limit=ML))
    R.call("drr direction", lambda: tl.drr(vol, orbit=2, detector=(8, 8), pixel=1.5,
                                           direction=[[0, 1, 0], [1, 0, 0], [0, 0, 1]], mem_limit=ML))
    R.call("drr missed", lambda: tl.drr(vol, (1, 1, 1), (5000, 5000, 5000), detector=(4, 4),
                                        poses=[{"source": [0, 0, 100], "center": [0, 0, -100], "u": [1, 0, 0],
                                                "v": [0, 1, 0], "pixel": [1, 1]}]))

    def drr_obj():
        res = {}
        with open(os.path.join(d, "geom.json")) as fh:
            geom = json.load(fh)
        with tl.DRR(vol, spacing=(1, 1, 1), origin=(-6, -5, -4), detector=(9, 11), batch=1) as r:
            res["geom"] = r(geom)
            res["list"] = r(geom["poses"][:1])
            o = r.orbit(4, 500, 250, 1.0)
            res["orbit_poses"] = o
            out = np.empty((4, 9, 11), np.float32)
            res["out_is_buf"] = r(o, out=out) is out
            res["out"] = out
            res["report"] = report_of(r)
            res["dot_sha"] = hashlib.sha256(r.dot().encode()).hexdigest()[:32]
        return res
    R.call("DRR object", drr_obj)

    # wavelet
    wv = ld("vol.npy")[:8, :8, :6]
    th, ph, xi = np.linspace(0, np.pi, 3, endpoint=False), [0.0, 1.0], [1.0, 1.5]
    R.call("wavelet reflect", lambda: tl.wavelet(wv, th, ph, xi, mem_limit=ML))
    R.call("wavelet wrap a", lambda: tl.wavelet(wv, th, ph, xi, a=1.3, boundary="wrap", mem_limit=ML))
    R.call("wavelet kernel stats", lambda: tl.wavelet(wv, 0.5, ph, 2.0, kernel="exp(-q/2)*c", params={"c": 2},
                                                      stats={"l1": "sum(abs(g))", "m": "mean(g)"}, mem_limit=ML))

    def wavelet_obj():
        res = {}
        with tl.Wavelet(ld("vol64.npy")[:6, :6, :6], stats=["l1=sum(abs(g))"], batch=2) as w:
            res["columns"] = w.columns
            res["small"] = w([0, 1], 0.5, 1.0)
            res["wider"] = w([0, 1], 0.5, [1.0, 3.0])  # a wider kernel: recompiled once for the padding
            res["again"] = w([0, 1], 0.5, 1.0)
            res["report"] = report_of(w)
            res["dot_sha"] = hashlib.sha256(w.dot().encode()).hexdigest()[:32]
        return res
    R.call("Wavelet object", wavelet_obj)

    # refused calls: the messages
    R.call("err interp bad reduce", lambda: tl.interp(f, x32, reduce="max("))
    R.call("err interp dtype", lambda: tl.interp(f, x32, dtype="float16"))
    R.call("err interp 1-d f", lambda: tl.interp(f[0], x32))
    R.call("err interp unknown keyword", lambda: tl.interp(f, x32, bogus=1))
    R.call("err interp batch", lambda: tl.Interp(f, batch=2.5))
    R.call("err interp param nan", lambda: tl.interp(f, x32, reduce="k*max(v)", params={"k": float("nan")}))
    R.call("err interp missing param", lambda: tl.interp(f, x32, reduce="k*max(v)"))
    R.call("err interp x dtype", lambda: tl.Interp(f)(x64))
    R.call("err affinity metric", lambda: tl.affinity(X, metric="foo"))
    R.call("err affinity shape", lambda: tl.Affinity(shape=(4, 5))(np.zeros((4, 6), np.float32)))
    R.call("err affinity block", lambda: tl.Affinity(shape=(4, 5), block=0))
    R.call("err affinity formula", lambda: tl.affinity(X, formula="sum(a*"))
    R.call("err affinity Y", lambda: tl.Affinity(shape=(4, 5))(np.zeros((4, 5), np.float32), np.zeros((4, 5), np.float32)))
    R.call("err affinity mem", lambda: tl.Affinity(shape=(40, 30), mem_limit="1KiB"))
    R.call("err drr both", lambda: tl.drr(vol, poses=[], orbit=2))
    R.call("err drr method", lambda: tl.drr(vol, orbit=2, detector=(4, 4), method="foo"))
    R.call("err drr detector", lambda: tl.DRR(vol, detector=(0, 4)))
    R.call("err drr 2-d", lambda: tl.DRR(vol[0]))
    R.call("err drr pose", lambda: tl.DRR(vol, detector=(4, 4))([{"source": [0, 0, 1]}]))
    R.call("err drr poses shape", lambda: tl.DRR(vol, detector=(4, 4))(np.zeros((2, 13))))
    R.call("err drr direction", lambda: tl.DRR(vol, direction=np.eye(2)))
    R.call("err wavelet xi", lambda: tl.wavelet(wv, 0, 0, 0.0))
    R.call("err wavelet boundary", lambda: tl.wavelet(wv, 0, 0, 1, boundary="mirror"))
    R.call("err wavelet stat", lambda: tl.wavelet(wv, 0, 0, 1, stats=["nope"]))
    R.call("err wavelet kernel", lambda: tl.wavelet(wv, 0, 0, 1, kernel="q+"))
    R.call("err closed", lambda: (lambda r: (r.close(), r(x32)))(tl.Interp(f)))
    R.call("err device", lambda: tl.Interp(f, device="tpu"))
    R.call("err cuda", lambda: tl.Interp(f, device="cuda"))


def npzsum(lists):
    """For each LIST (CASE.npz, a file naming one .npz per line): one line per
    member of each, "@@ CASE FILE:MEMBER: dtype shape sha256" (a member that is
    not .npy, a shard's meta.json, as its text)."""
    for lst in lists:
        case = os.path.basename(lst)[:-len(".npz")]
        with open(lst) as fh:
            paths = [line.rstrip("\n") for line in fh if line.strip()]
        for p in paths:
            try:
                with np.load(p) as z:
                    for k in sorted(z.files):
                        a = z[k]
                        if isinstance(a, bytes):  # shown on one line: its sha256, and its text up to 400 characters
                            t = a.decode(errors="replace").replace("\\", "\\\\").replace("\n", "\\n")
                            t = t if len(t) <= 400 else t[:400] + f"… ({len(a)} bytes)"
                            print(f"@@ {case} {os.path.basename(p)}:{k}: sha256:{hashlib.sha256(a).hexdigest()[:32]} {t}")
                        else:
                            print(f"@@ {case} {os.path.basename(p)}:{k}: {a.dtype} {a.shape} sha256:{digest(a)}")
            except Exception as e:  # noqa: BLE001 - an unreadable file is a result too
                print(f"@@ {case} {os.path.basename(p)}: unreadable: {type(e).__name__}: {e}")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mode = sys.argv[1]
    if mode == "inputs":
        inputs(sys.argv[2])
    elif mode == "python":
        python_sweep(sys.argv[2], sys.argv[3])
    elif mode == "npzsum":
        npzsum(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
