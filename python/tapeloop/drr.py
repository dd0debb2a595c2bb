"""DRRs: X-ray line integrals through a volume, pose after pose."""
import ctypes
import json
import threading
import warnings
from typing import NamedTuple

import numpy as np

from . import shards
from ._lib import (DEFAULT_INT, LIBRARY_DEFAULT, MAIN_THREAD, SIGINT, Compiled, Error, as_array, boolean, check, config,
                   converted, default, digest, dtype_of, finite, get_ident, getsignal, integer, interruptible, lib, limit,
                   mem_limit_of, not_finite, number, numbers, output, params_of, taken)

POSE_KEYS = ("source", "center", "u", "v", "pixel")
# What a pose of the geometry JSON may hold besides POSE_KEYS, and what its
# document may hold besides "poses": the CLI's --geometry reads the same.
POSE_EXTRA = ("rows", "cols", "matrix")
DOC_KEYS = ("poses", "frame", "projection")


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
    for tapeloop.merge (see docs/python.md). loss_and_grad() gives the loss
    between the DRRs of the volume under a rigid transform and X-ray images,
    with its gradient in the transform's six parameters; register() finds
    the transform (2D/3D registration, the CLI's register).
    """

    _what = "drr"
    # The registrations compiled for loss_and_grad and register (see
    # _registration): (key, _Registration) or None; _compiles counts them.
    _reg_eval = None
    _reg_run = None
    _compiles = 0

    def __init__(self, volume, spacing=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), *, detector=LIBRARY_DEFAULT,
                 direction=None, frame=None, method="siddon", step=None, hu=False, mu_water=None, mu=None, post=None,
                 filter=None, params=None, batch=None, mem_limit=None, fail_on_nonfinite=False, strict=False, dtype=None, device="cpu",
                 gpu=None):
        detector = default("drr", "detector", detector)  # the CLI's --detector
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
        self._frame = frame or "lps"
        self._reg_locks = {"_reg_eval": threading.Lock(), "_reg_run": threading.Lock()}

    def orbit(self, n, sdd=LIBRARY_DEFAULT, sid=LIBRARY_DEFAULT, pixel=LIBRARY_DEFAULT, isocenter=None, start=0.0,
              axis="z"):
        """The CLI's --orbit n: n poses over 360° about axis ("x", "y", "z" or
        a 3-vector; the CLI's --axis) through isocenter (world mm; default the
        volume's centre), pose k at start + 360°·k/n degrees, source–detector
        distance sdd and source–isocentre distance sid (mm), square pixels of
        pixel mm, each by default the CLI's (--sdd, --sid, --pixel); an (n, 14)
        array."""
        if n is None:
            raise Error("orbit=: want a whole number, got None")
        sdd, sid, pixel = (default("drr", k, v) for k, v in (("sdd", sdd), ("sid", sid), ("pixel", pixel)))
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
        if n > limit("drr", "poses"):  # refused with the library's message, before the poses are made
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


    def loss_and_grad(self, transform, poses, targets, loss="ncc", patch=0):
        """The loss between the DRRs of the volume moved by a rigid transform
        and targets, and its gradient with respect to the transform's six
        parameters: (loss, grad), a float and a (6,) float64 array.

        transform moves the volume as the CLI's transform.json does:
        T(x) = R(x − center) + center + translation, R the rotation by the
        rotation vector (radians); a dict with "rotation" and "translation"
        (3 numbers each) and optionally "center" (world mm; default the
        volume's centre), or a 4×4 rigid "matrix" (rows first) about
        "center"; or 6 numbers (rotation vector, then translation in mm)
        about the volume's centre. grad is with respect to the rotation
        vector and the translation in that order, about that centre (a
        matrix's rotation vector and translation about it). poses: as a call
        takes them (P poses). targets: the (P, R, C) images to match, line
        integrals as a call renders them. loss: "ncc" (1 − normalised
        cross-correlation), "gncc" (the same of the images' Sobel gradients)
        or "mse"; patch: compute it over patch×patch pixel patches and
        average (0: whole images).

        The images are rendered as the object renders them: its method
        (siddon or trilinear) and step, its hu or mu; on the CPU, whatever
        its device. A DRR with post= or filter= raises Error: the loss
        compares line integrals. The graph parameters → images → loss and
        its gradient is compiled at the first call and replayed by later
        calls with the same poses, targets, loss, patch and centre."""
        self._handle()
        params, center = self._transform("transform", transform)
        p = np.ascontiguousarray(params, np.float64)
        f, g = ctypes.c_double(), np.empty(6, np.float64)
        with self._reg_locks["_reg_eval"]:  # the compiled one stays while it runs
            r = self._registration("_reg_eval", poses, targets, loss, patch, center, levels=1)
            check(lib.tl_register_eval(r._handle(), p.ctypes.data, ctypes.byref(f), g.ctypes.data, interruptible()))
        return f.value, g

    def register(self, targets, poses, init=None, loss="ncc", patch=0, levels=3, max_steps=100, tolerance=1e-5,
                 accept=0.1, method="lbfgs"):
        """2D/3D registration, as `tapeloop register`: the rigid transform
        of the volume whose DRRs seen with poses match targets (P, R, C),
        found by minimising loss_and_grad's loss with L-BFGS (method: only
        "lbfgs"), coarse to fine over levels pyramid levels (detector
        pixels and voxels averaged over blocks of 2^(levels−1) … 2, 1), at
        most max_steps steps per level; a level ends when the loss improved
        by less than tolerance (relative) over 3 steps. init: where to start
        (a transform as loss_and_grad takes it; None: the identity about the
        volume's centre); the transform turns about its centre.

        Returns a RegisterResult: transform (a dict as transform.json: frame,
        center, rotation, translation, matrix), loss (at the finest level),
        converged, reason (why not, else ""), trace (a NumPy structured array
        of the optimiser's steps: step, level, loss, rx, ry, rz, tx, ty, tz,
        seconds) and evaluations. A run whose last level stopped before it
        converged, or whose loss ended above accept, returns converged=False
        and warns (RuntimeWarning) with the reason: its start was likely
        outside the capture range.

        Rendered as the object renders (loss_and_grad says how); the CLI's
        register uses trilinear by default, this object's method is used
        here. Siddon's loss has a kink wherever a ray crosses a voxel edge,
        and its line search can fail at the minimum: reported as not
        converged ("stopped on Failure"); trilinear is smooth between
        samples."""
        self._handle()
        if method != "lbfgs":
            raise Error(f'method=: {method!r}; the registration optimises by "lbfgs" (L-BFGS) only')
        params, center = self._transform("init", {"rotation": [0.0] * 3, "translation": [0.0] * 3}
                                         if init is None else init)
        levels, max_steps = integer("levels", levels), integer("max_steps", max_steps)
        tolerance, accept = finite("tolerance", tolerance), finite("accept", accept)
        for name, v in (("levels", levels), ("max_steps", max_steps), ("tolerance", tolerance), ("accept", accept)):
            if v is None:
                raise Error(f"{name}=: want a number, got None")
        p = np.ascontiguousarray(params, np.float64)
        out = ctypes.c_void_p()
        with self._reg_locks["_reg_run"]:
            r = self._registration("_reg_run", poses, targets, loss, patch, center, levels=levels,
                                   max_steps=max_steps, tolerance=tolerance, accept=accept)
            check(lib.tl_register_run(r._handle(), p.ctypes.data, ctypes.byref(out), interruptible()))
        res = json.loads(taken(out.value))
        t = res["transform"]
        transform = {"frame": self._frame, **{k: np.asarray(t[k], np.float64).tolist()
                                              for k in ("center", "rotation", "translation", "matrix")}}
        tr = res["trace"]
        trace = np.zeros(len(tr["step"]), TRACE_DTYPE)
        for name in TRACE_DTYPE.names:
            trace[name] = [np.nan if x is None else x for x in tr[name]]
        loss_ = np.nan if res["loss"] is None else float(res["loss"])
        result = RegisterResult(transform, loss_, bool(res["converged"]), res["reason"], trace, int(res["evaluations"]))
        if not result.converged:
            warnings.warn(f"register: not converged: {result.reason}", RuntimeWarning, stacklevel=2)
        return result

    def _transform(self, name, transform):
        """transform (a dict as transform.json, or 6 parameters about the
        volume's centre) as (its 6 parameters, its centre) read by the
        library, which checks that a matrix is rigid."""
        if isinstance(transform, dict):
            unknown = [k for k in transform if k not in TRANSFORM_KEYS]
            if unknown:
                raise Error(f"{name}=: unknown key {unknown[0]!r} (a transform holds {', '.join(TRANSFORM_KEYS)})")
            if "frame" in transform and transform["frame"] != self._frame:
                raise Error(f"{name}=: the transform is in the {transform['frame']!r} frame, the DRR's frame is "
                            f"{self._frame!r}")
            doc = {}
            for k in ("center", "rotation", "translation"):
                if k in transform:
                    doc[k] = list(numbers(f"{name} {k}", transform[k], 3))
            if "matrix" in transform:
                m = converted(f"{name} matrix", transform["matrix"], np.float64)
                if m.shape != (4, 4):
                    raise Error(f"{name}=: matrix of shape {m.shape}, want (4, 4) (rows first)")
                if not np.isfinite(m).all():
                    raise Error(f"{name}=: the matrix holds a value that is not finite")
                doc["matrix"] = m.tolist()
            if not any(k in doc for k in ("matrix", "rotation", "translation")):
                raise Error(f'{name}=: want "matrix" (4×4) or "rotation" and "translation"')
        else:
            try:
                p = numbers(name, np.ravel(transform) if isinstance(transform, np.ndarray) else transform, 6)
            except Error:
                raise Error(f"{name}=: want a dict as transform.json or 6 numbers (rotation vector in radians, "
                            f"translation in mm), got {transform!r}") from None
            doc = {"rotation": list(p[:3]), "translation": list(p[3:])}
        params, center = np.empty(6, np.float64), np.empty(3, np.float64)
        err = lib.tl_register_transform(self._handle(), json.dumps(doc, allow_nan=False).encode(), params.ctypes.data,
                                        center.ctypes.data)
        if err:
            try:
                check(err)
            except Error as e:
                raise Error(f"{name}=: {str(e).removeprefix('transform: ')}") from None
        return params, tuple(center)

    def _registration(self, slot, poses, targets, loss, patch, center, **settings):
        """The registration compiled for these poses, targets, loss, patch,
        centre and settings, kept in slot: the one there when they match,
        else a new one (closing the old). The caller holds the slot's lock."""
        p = poses_array(poses, self.detector)
        n = p.shape[0]
        if not isinstance(loss, str):
            raise Error(f'loss=: want "ncc", "gncc" or "mse", got {loss!r}')
        patch = integer("patch", patch)
        if patch is None:
            raise Error("patch=: want a whole number, got None")
        t = converted("targets", targets, np.float64)
        if t.ndim == 2 and n == 1:
            t = t[None]
        if t.shape != (n,) + self.detector:
            raise Error(f"targets=: shape {t.shape}, want {(n,) + self.detector}: one image of the detector's "
                        f"{self.detector[0]}x{self.detector[1]} pixels per pose")
        bad = ~np.isfinite(t)
        if bad.any():
            k, i, j = np.argwhere(bad)[0]
            raise Error(f"targets=: image {k}, pixel ({i}, {j}) is {t[k, i, j]!r}; targets must be finite")
        key = (digest(p), digest(t), loss, patch, center, tuple(sorted(settings.items())))
        have = getattr(self, slot)
        if have is not None and have[0] == key and have[1]._h:
            return have[1]
        if have is not None:
            setattr(self, slot, None)
            have[1].close()
        cfg = json.dumps(dict(loss=loss, patch=patch, center=list(center), **settings), allow_nan=False).encode()
        h = ctypes.c_int64(0)
        check(lib.tl_register_create(self._handle(), cfg, p.ctypes.data, p.size, t.ctypes.data, t.size,
                                     ctypes.byref(h)))
        r = _Registration()
        r._own(h.value)
        self._compiles += 1
        setattr(self, slot, (key, r))
        return r

    def interrupt(self):
        """Compiled.interrupt, for a render, loss_and_grad or register in
        progress."""
        super().interrupt()
        for slot in (self._reg_eval, self._reg_run):
            if slot is not None:
                slot[1].interrupt()

    def close(self):
        """Compiled.close, and the registrations compiled for it."""
        for name in ("_reg_eval", "_reg_run"):
            slot = self.__dict__.get(name)
            if slot is not None:
                setattr(self, name, None)
                slot[1].close()
        super().close()


# What a transform dict may hold: transform.json's keys.
TRANSFORM_KEYS = ("frame", "center", "rotation", "translation", "matrix", "loss", "converged")

TRACE_DTYPE = np.dtype([("step", np.int64), ("level", np.int64), ("loss", np.float64), ("rx", np.float64),
                        ("ry", np.float64), ("rz", np.float64), ("tx", np.float64), ("ty", np.float64),
                        ("tz", np.float64), ("seconds", np.float64)])


class RegisterResult(NamedTuple):
    """What DRR.register found: transform (a dict as transform.json), loss,
    converged, reason (why not converged, else ""), trace (a structured
    array: step, level, loss, rx, ry, rz, tx, ty, tz, seconds) and
    evaluations (of the loss and its gradient, all levels)."""
    transform: dict
    loss: float
    converged: bool
    reason: str
    trace: np.ndarray
    evaluations: int


class _Registration(Compiled):
    """A registration compiled for a DRR (its loss_and_grad's or register's
    cache); built on demand, never pickled (the DRR pickles by recipe)."""

    _what = "registration"

    def __reduce__(self):
        raise Error("registration: not picklable; pickle the DRR, which compiles it again on demand")


def drr(volume, spacing=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), poses=None, *, orbit=None, detector=LIBRARY_DEFAULT,
        sdd=LIBRARY_DEFAULT, sid=LIBRARY_DEFAULT, pixel=LIBRARY_DEFAULT, shard=None, **kw):
    """One-shot DRR: the (P, R, C) images of poses, or of the CLI's orbit of
    `orbit` poses (with sdd, sid, pixel) about the volume's centre. Other
    keywords are DRR's (method, step, hu, mu, post, filter, params, direction, frame, …);
    shard=(i, n): the poses of shard i of n only (see DRR)."""
    if (poses is None) == (orbit is None):
        raise Error("drr: give poses or orbit=N, not both")
    with DRR(volume, spacing, origin, detector=detector, **kw) as r:
        return r(r.orbit(orbit, sdd, sid, pixel) if orbit is not None else poses, shard=shard)
