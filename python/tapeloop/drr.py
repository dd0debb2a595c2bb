"""DRRs: X-ray line integrals through a volume, pose after pose."""
import ctypes
import warnings

import numpy as np

from . import shards
from ._lib import (DEFAULT_INT, MAIN_THREAD, SIGINT, Compiled, Error, as_array, boolean, check, config, converted,
                   dtype_of, finite, get_ident, getsignal, integer, lib, mem_limit_of, not_finite, number, numbers,
                   output, params_of, taken)

POSE_KEYS = ("source", "center", "u", "v", "pixel")
# What a pose of the geometry JSON may hold besides POSE_KEYS, and what its
# document may hold besides "poses": the CLI's --geometry reads the same.
POSE_EXTRA = ("rows", "cols", "matrix")
DOC_KEYS = ("poses", "frame", "projection")
MAX_POSES = 1 << 20  # the most poses of one orbit or call (the library's ops.MaxPoses)


def real(name, x):
    """x as a C-contiguous float64 array, from real numbers only (integers,
    unsigned or floating point of any width); complex, boolean, text or
    other values raise Error rather than being converted."""
    a = as_array(name, x)
    if a.dtype.kind not in "iuf":
        raise Error(f"{name}: {a.dtype} values; want real numbers (integers or floating point)")
    return converted(name, a, np.float64)


def poses_array(poses, detector):
    """poses as a C-contiguous (P, 14) float64 array: one pose (a dict of the
    geometry file's source, center, u, v and pixel, and rows and cols if
    given, which must be the detector's), a list of them, a geometry document
    {"poses": [...]}, or an array of 14 numbers per pose."""
    if isinstance(poses, dict) and "poses" in poses:
        unknown = [k for k in poses if k not in DOC_KEYS]
        if unknown:
            raise Error(f"geometry: unknown key {unknown[0]!r} (a geometry document holds {', '.join(DOC_KEYS)})")
        poses = poses["poses"]
    elif isinstance(poses, dict):
        poses = [poses]
    if isinstance(poses, (list, tuple)) and poses and isinstance(poses[0], dict):
        rows = []
        for i, p in enumerate(poses):
            if not isinstance(p, dict):
                raise Error(f"geometry: pose {i} is a {type(p).__name__}, want a dict like pose 0")
            unknown = [k for k in p if k not in POSE_KEYS + POSE_EXTRA]
            if unknown:
                raise Error(f"geometry: pose {i} has an unknown key {unknown[0]!r} "
                            f"(a pose holds {', '.join(POSE_KEYS + POSE_EXTRA)})")
            missing = [k for k in POSE_KEYS if k not in p]
            if missing:
                raise Error(f"geometry: pose {i} lacks {', '.join(missing)}")
            for k, want in zip(("rows", "cols"), detector):
                if k in p and p[k] != want:
                    raise Error(f"geometry: pose {i} has {k} {p[k]!r}, the object's detector is {detector[0]}x{detector[1]}")
            row = []
            for k, n in zip(POSE_KEYS, (3, 3, 3, 3, 2)):
                v = real(f"pose {i}: {k}", p[k]).ravel()
                if v.size != n:
                    raise Error(f'geometry: pose {i}: "{k}" must be {n} numbers, got {v.size}')
                row.extend(v)
            rows.append(row)
        return np.array(rows, dtype=np.float64)
    a = real("poses", poses)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != 14 or a.shape[0] == 0:
        raise Error(f"poses: shape {a.shape}, want (P, 14): source, center, u, v (3 each) and pixel (2) per pose")
    return np.ascontiguousarray(a)


def filter_stages(filter):
    """filter= as the config's list of stages: one stage (a str), or a list
    of them; None stays None."""
    if filter is None:
        return None
    stages = [filter] if isinstance(filter, str) else list(filter)
    for s in stages:
        if not isinstance(s, str):
            raise Error(f"filter=: {s!r} is not a stage such as 'gauss:sigma_mm=0.8'")
    return stages or None


class DRR(Compiled):
    """DRRs of one volume onto a detector of R×C pixels, compiled once; each
    call renders a set of poses, block by block, over the same buffers.

    volume: an (X, Y, Z) array, voxel (i, j, k) at volume[i, j, k], copied once
    (as float32) at creation. spacing (its voxel size, mm) and origin (the
    centre of voxel (0, 0, 0), world mm) place it; direction (3×3, columns the
    world directions of the index axes) rotates it (default identity). The
    world frame is the poses' (LPS for DICOM and plastimatch geometry); frame
    ("lps", the default, or "ras") names it as the CLI's --frame does, and
    converts nothing: an array, like an .npy file, has no header to convert
    from, so its spacing, origin and direction are taken as given. detector:
    (R, C). method: "siddon" (exact path lengths, the default) or "trilinear"
    (samples step mm apart; default half the smallest voxel size). hu=True:
    the volume is in Hounsfield units (μ = mu_water·max(0, 1 + HU/1000));
    mu: your formula over a voxel's value h giving μ per mm, applied once;
    post: your formula over a pixel's line integral p, e.g. "exp(-p)";
    params: their parameters. filter: an image filter applied after post (to
    the line integrals without it), a stage as the CLI's --filter writes it
    ("gauss:sigma_mm=0.8", σ in mm on the detector; "gauss:sigma_px=2",
    "box:3", "deriv:x", "sobel:y"; ",mode=nearest" for edge pixels instead
    of reflection), or a list of stages applied in order; a stage in mm takes
    the pixel size of a call's poses, which must then share it. A fault of a call's geometry (a source inside
    the volume, a detector reaching into it, the volume behind the source, a
    pose whose every ray misses it) is a warning (warnings.warn, a line
    each), or with strict=True an Error. batch: poses per block (default planned under
    mem_limit). dtype: the images', "float32" or np.float32 (the only one;
    None is the same). device: "cpu" (default) or "cuda" (a library built with
    CUDA; gpu: its number). The CLI's drr flags of the same names.

    Call with poses — a list of dicts with the geometry file's "source",
    "center", "u", "v" (3 numbers each) and "pixel" (2), or a (P, 14) array of
    those numbers — and it returns the (P, R, C) float32 images (out= takes a
    C-contiguous one). A (P, 14) float64 C-contiguous array is passed by
    pointer; other forms are converted once. orbit() gives the CLI's orbit.
    shard=(i, n) renders the poses of shard i of n only, as a tapeloop.Shard
    for tapeloop.merge (see docs/python.md).
    """

    _what = "drr"

    def __init__(self, volume, spacing=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), *, detector=(200, 200),
                 direction=None, frame=None, method="siddon", step=None, hu=False, mu_water=None, mu=None, post=None,
                 filter=None, params=None, batch=None, mem_limit=None, fail_on_nonfinite=False, strict=False, dtype=None, device="cpu",
                 gpu=None):
        built_from = dict(locals())
        v = converted("volume", volume, np.float32)
        if v.ndim != 3:
            raise Error(f"volume=: shape {v.shape}, want (X, Y, Z)")
        rows, cols = numbers("detector", detector, 2, int)
        dirn = None
        if direction is not None:
            dirn = converted("direction", direction, np.float64)
            if dirn.shape != (3, 3):
                raise Error(f"direction: shape {dirn.shape}, want (3, 3): the world directions of the index axes as columns")
            for (i, j), x in np.ndenumerate(dirn):
                if not np.isfinite(x):
                    raise not_finite("direction", x, f" (row {i}, column {j})")
            if not dirn.any():  # the library would read it as not given, the identity
                raise Error("direction=: all zeros; want the world directions of the index axes as columns, "
                            "or None for the identity")
            dirn = dirn.tolist()
        cfg = config(spacing=numbers("spacing", spacing, 3), origin=numbers("origin", origin, 3), direction=dirn,
                     frame=frame, rows=rows, cols=cols, method=method, step=finite("step", step), hu=boolean("hu", hu),
                     mu_water=finite("mu_water", mu_water), mu=mu, post=post, filter=filter_stages(filter),
                     params=params_of(params), fail_on_nonfinite=boolean("fail_on_nonfinite", fail_on_nonfinite),
                     strict=boolean("strict", strict),
                     batch=integer("batch", batch) or 0, dtype=dtype_of(dtype, None),
                     mem_limit=mem_limit_of(mem_limit), device=device, gpu=gpu)
        h = ctypes.c_int64(0)
        check(lib.tl_drr_create(cfg, v.ctypes.data, *v.shape, ctypes.byref(h)))
        self._own(h.value)
        self._keep(built_from, volume=v)
        self.detector = (rows, cols)
        self._run = lib.tl_drr_run

    def orbit(self, n, sdd=1020.0, sid=510.0, pixel=2.0, isocenter=None, start=0.0, axis="z"):
        """The CLI's --orbit n: n poses over 360° about axis ("x", "y", "z" or
        a 3-vector; the CLI's --axis) through isocenter (world mm; default the
        volume's centre), pose k at start + 360°·k/n degrees, source–detector
        distance sdd and source–isocentre distance sid (mm), square pixels of
        pixel mm; an (n, 14) array."""
        if n is None:
            raise Error("orbit=: want a whole number, got None")
        n, sdd, sid, pixel = integer("orbit", n), number("sdd", sdd), number("sid", sid), number("pixel", pixel)
        start = number("start", start)
        if n < 1:
            raise Error(f"geometry: --orbit {n}: need at least one pose")
        iso = None
        if isocenter is not None:
            iso = converted("isocenter", isocenter, np.float64).ravel()
            if iso.size != 3:
                raise Error(f"isocenter=: want 3 numbers, got {iso.size}")
        axes = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}
        ax = converted("axis", axes[axis] if isinstance(axis, str) and axis in axes else axis, np.float64).ravel()
        if ax.size != 3:
            raise Error(f'axis=: want "x", "y", "z" or 3 numbers, got {axis!r}')
        h, c = self._handle(), None if iso is None else iso.ctypes.data
        if n > MAX_POSES:  # refused with the library's message, before the poses are made
            check(lib.tl_drr_orbit(h, n, sdd, sid, pixel, c, start, ax.ctypes.data, None, 0))
        p = np.empty((n, 14), np.float64)
        check(lib.tl_drr_orbit(h, n, sdd, sid, pixel, c, start, ax.ctypes.data, p.ctypes.data, p.size))
        return p

    def __call__(self, poses, out=None, *, shard=None):
        h = self._handle()
        if type(poses) is np.ndarray and poses.dtype == np.float64 and poses.flags.c_contiguous and \
                poses.ndim in (1, 2) and poses.shape[-1] == 14 and poses.size:  # the fast path: as orbit() gives them
            p = poses
        else:
            p = poses_array(poses, self.detector)
        n = p.size // 14
        if shard is not None:
            p = p.reshape(n, 14)
            i, k, lo, hi = shards.split(shard, n, "poses")
            return shards.Shard("drr", i, k, lo, hi, n, shards.fingerprint(self, p), self(p[lo:hi], out))
        if type(out) is np.ndarray and out.dtype == np.float32 and out.shape == (n,) + self.detector \
                and out.flags.c_contiguous and out.flags.writeable:
            img = out
        else:
            img = output(out, np.float32, (n,) + self.detector)
        it = 1 if get_ident() == MAIN_THREAD and getsignal(SIGINT) is DEFAULT_INT else 0
        warned = ctypes.c_void_p()  # this call's own warnings, given back with it
        err = self._run(h, p.ctypes.data, p.size, img.ctypes.data, img.size, ctypes.byref(warned), it)
        if err:
            check(err)
        if warned.value:  # the geometry's faults (strict=True makes them errors), in this call's thread
            for line in taken(warned.value).splitlines():
                warnings.warn(line, stacklevel=2)
        return img


def drr(volume, spacing=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), poses=None, *, orbit=None, detector=(200, 200),
        sdd=1020.0, sid=510.0, pixel=2.0, shard=None, **kw):
    """One-shot DRR: the (P, R, C) images of poses, or of the CLI's orbit of
    `orbit` poses (with sdd, sid, pixel) about the volume's centre. Other
    keywords are DRR's (method, step, hu, mu, post, filter, params, direction, frame, …);
    shard=(i, n): the poses of shard i of n only (see DRR)."""
    if (poses is None) == (orbit is None):
        raise Error("drr: give poses or orbit=N, not both")
    with DRR(volume, spacing, origin, detector=detector, **kw) as r:
        return r(r.orbit(orbit, sdd, sid, pixel) if orbit is not None else poses, shard=shard)
