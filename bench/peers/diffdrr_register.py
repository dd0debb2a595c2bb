#!/usr/bin/python3
"""DiffDRR beside `tapeloop register`: the same CT, the same views, timed in one script.

DiffDRR (github.com/eigenvivek/DiffDRR) is imported from bench/peers/diffdrr/diffdrr (its own
files, copied there by hand and never committed: see bench/peers/diffdrr/README.md) with the
shims of bench/peers/diffdrr/shims.py for Debian's torch 1.13.1. tapeloop runs as a subprocess
(--tl), interleaved with DiffDRR, repeat by repeat.

Inputs are tapeloop's: a raw CT (--volume, --shape, --spacing, --dtype, --order xyz|zyx, --hu,
--mu-water), a geometry.json of views as `tapeloop drr` writes it (--geometry, --views picks
poses), and optionally a target .npy (P, R, C) of line integrals (--target: register once to it
and stop). Without --target it measures:

  check     both tools render the unmoved volume (Siddon, trilinear): NCC, max relative difference
  forward   one render of the views, Siddon and trilinear (DiffDRR under torch.no_grad)
  grad      forward + backward of the NCC with respect to the pose
  register  whole registrations from the identity to known transforms (rotation up to 10° about
            the volume's centre, translation up to 10 mm; targets rendered by tapeloop's Siddon
            plus Gaussian noise of 5 % of the targets' standard deviation), tapeloop's
            L-BFGS against DiffDRR's Adam on its multiscale NCC; final mTRE per start

and writes everything to --out (JSON). Run with /usr/bin/python3 (Debian's torch).
"""

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "diffdrr"))
import shims  # noqa: E402

shims.install()
import torch  # noqa: E402
from diffdrr.drr import DRR  # noqa: E402
from diffdrr.metrics import MultiscaleNormalizedCrossCorrelation2d, NormalizedCrossCorrelation2d  # noqa: E402
from diffdrr.pose import RigidTransform, convert  # noqa: E402


# ---------------------------------------------------------------- volume and geometry


def load_volume(a):
    """The volume as tapeloop reads it: an (X, Y, Z) float32 array of μ per mm."""
    shape = [int(s) for s in a.shape.split(",")]
    raw = np.fromfile(a.volume, dtype=np.dtype(a.dtype).newbyteorder("<"))
    if a.order == "xyz":
        vol = raw.reshape(shape[::-1]).transpose(2, 1, 0)
    else:
        vol = raw.reshape(shape)
    vol = vol.astype(np.float64)
    if a.hu:
        vol = a.mu_water * np.maximum(0.0, 1.0 + vol / 1000.0)
    return np.ascontiguousarray(vol, dtype=np.float32)


def tl_volume_flags(a):
    f = ["--volume", a.volume, "--shape", a.shape, "--dtype", a.dtype, "--order", a.order, "--spacing", a.spacing]
    if a.hu:
        f += ["--hu", "--mu-water", str(a.mu_water)]
    return f


def pixel_centres(p):
    """tapeloop's pixel centres of a pose (ops.Pose.Encode): (R, C, 3)."""
    u = np.asarray(p["u"], float)
    v = np.asarray(p["v"], float)
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    pu, pv = p["pixel"]
    R, C = p["rows"], p["cols"]
    c = np.arange(C) - (C - 1) / 2
    r = np.arange(R) - (R - 1) / 2
    return np.asarray(p["center"], float) + r[:, None, None] * pv * v + c[None, :, None] * pu * u


def camera_of(p, shift):
    """DiffDRR's camera for a tapeloop pose: the extrinsic (camera to world) matrix and the
    detector's intrinsics. DiffDRR puts pixel (r, c) at camera point (delx·s_c, dely·t_r, sdd),
    t_r = (R−1)/2 − r and s_c = ±(c − (C−1)/2) (− with reverse_x_axis), source at the origin:
    so the camera's axes are ±u, −v and the source-to-detector direction, and reverse_x_axis
    is chosen to make that frame right-handed. `shift` is subtracted from world points (DiffDRR
    puts the volume's centre at its world origin)."""
    S = np.asarray(p["source"], float) - shift
    D = np.asarray(p["center"], float) - shift
    u = np.asarray(p["u"], float)
    v = np.asarray(p["v"], float)
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    sdd = np.linalg.norm(D - S)
    n = (D - S) / sdd
    if abs(n @ u) > 1e-9 or abs(n @ v) > 1e-9:
        raise SystemExit("diffdrr_register: a pose whose detector is not square to its central ray (needs x0, y0)")
    reverse = np.linalg.det(np.stack([u, -v, n], axis=1)) < 0
    ex = -u if reverse else u
    M = np.eye(4)
    M[:3, 0], M[:3, 1], M[:3, 2], M[:3, 3] = ex, -v, n, S
    return M, dict(sdd=float(sdd), height=int(p["rows"]), width=int(p["cols"]), delx=float(p["pixel"][0]), dely=float(p["pixel"][1]), reverse_x_axis=bool(reverse))


class Image:
    def __init__(self, data, affine):
        self.data, self.affine = data, affine


def make_subject(vol, spacing, shift):
    """What DRR.__init__ reads of a torchio Subject. DiffDRR's renderers put voxel i on [i, i+1]
    of the space its affine's inverse maps to (grid_sample, align_corners=False), so the affine
    here maps that space to tapeloop's placement: voxel (0, 0, 0) centred at the origin, i.e.
    its corner at −spacing/2, less `shift`."""
    A = np.eye(4)
    A[:3, :3] = np.diag(spacing)
    A[:3, 3] = -np.asarray(spacing) / 2 - shift
    t = torch.from_numpy(vol)[None]
    return shims.Subject(volume=Image(t, A), density=Image(t, A), mask=None, reorient=torch.eye(4))


# ---------------------------------------------------------------- rigid transforms


def rotvec_matrix(w):
    th = np.linalg.norm(w)
    if th < 1e-15:
        return np.eye(3)
    k = w / th
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(th) * K + (1 - math.cos(th)) * K @ K


def about(R, t, c):
    """4×4 of p ↦ R(p − c) + c + t."""
    M = np.eye(4)
    M[:3, :3] = R
    M[:3, 3] = c + t - R @ c
    return M


def seen_from(poses, T):
    """tapeloop's register.SeenFrom: the poses moved by T⁻¹."""
    Ti = np.linalg.inv(T)
    out = []
    for p in poses:
        q = dict(p)
        q["source"] = list(Ti[:3, :3] @ np.asarray(p["source"]) + Ti[:3, 3])
        q["center"] = list(Ti[:3, :3] @ np.asarray(p["center"]) + Ti[:3, 3])
        q["u"] = list(Ti[:3, :3] @ np.asarray(p["u"]))
        q["v"] = list(Ti[:3, :3] @ np.asarray(p["v"]))
        out.append(q)
    return out


def mtre(A, B, shape, spacing):
    """Mean over a 10×10×10 grid spanning the volume's box of |A p − B p| (register.MTRE)."""
    g = [np.linspace(0, n - 1, 10) * s for n, s in zip(shape, spacing)]
    P = np.stack(np.meshgrid(*g, indexing="ij"), -1).reshape(-1, 3)
    d = (P @ A[:3, :3].T + A[:3, 3]) - (P @ B[:3, :3].T + B[:3, 3])
    return float(np.linalg.norm(d, axis=1).mean())


# ---------------------------------------------------------------- the two tools


class Peer:
    """DiffDRR's DRR module for the views, with the volume's centre at the world origin."""

    def __init__(self, vol, spacing, poses, renderer, **renderer_kwargs):
        self.shift = (np.array(vol.shape) - 1) / 2 * spacing
        cams = [camera_of(p, self.shift) for p in poses]
        intr = cams[0][1]
        if any(c[1] != intr for c in cams):
            raise SystemExit("diffdrr_register: the views must share one detector (sdd, size, pixel)")
        self.drr = DRR(make_subject(vol, spacing, self.shift), renderer=renderer, **intr, **renderer_kwargs)
        self.views = RigidTransform(torch.tensor(np.stack([c[0] for c in cams]), dtype=torch.float32))
        self.kwargs = {}

    def render(self, delta=None, **kw):
        """The views' images, (P, R, C), the volume moved by delta⁻¹ (DiffDRR world)."""
        pose = self.views if delta is None else self.views.compose(delta)
        return self.drr(pose, **kw)[:, 0]

    def rays(self):
        s, t = self.drr.detector(self.views, None)
        return s.detach().numpy() + self.shift, t.detach().numpy() + self.shift


def delta_of(rot, xyz):
    """DiffDRR's pose parameterisation (Registration's: euler_angles ZXY and a translation,
    through diffdrr.pose.convert), one perturbation shared by every view."""
    return convert(rot, xyz, parameterization="euler_angles", convention="ZXY")


CPU = {"tapeloop": 0.0}


def run(cmd):
    """Runs a tapeloop command; returns its wall time and process. CPU["tapeloop"] gets its CPU
    seconds (user + system, all threads: the machine is shared, so CPU time is the steadier
    figure)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU["tapeloop"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode not in (0, 2):
        raise SystemExit(f"diffdrr_register: {' '.join(cmd)}: exit {p.returncode}: {p.stderr}")
    return dt, p


def tl_drr(a, geom, method, out):
    rep = out + ".report.json"
    dt, _ = run([a.tl, "drr", *tl_volume_flags(a), "--geometry", geom, "--method", method, "--out", out, "-q", "--report", rep])
    r = json.load(open(rep))
    return dt, r["summary"]["median_ms"] / 1e3, np.load(os.path.join(out, "drr.npy"))


def stats(xs):
    return {"min": min(xs), "median": statistics.median(xs), "all": xs}


def ncc(a, b):
    a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
    return float(a @ b / math.sqrt((a @ a) * (b @ b)))


# ---------------------------------------------------------------- registration with DiffDRR


def diffdrr_register(peer, target, truth, shape, spacing, a, log):
    """DiffDRR's registration loop as its tutorials and xvr run it: Adam (maximize) on
    MultiscaleNormalizedCrossCorrelation2d([None, 9], [0.5, 0.5]), learning rates 1e-2 for the
    Euler angles (rad) and 1e0 for the translation (mm), ReduceLROnPlateau. Stops at mTRE < 1 mm
    (checked after every step, outside the timing; never without a truth) or --max-steps.
    Returns the transform found in tapeloop's world: DiffDRR's world is tapeloop's less the
    volume's centre (peer.shift), and the views seen from the volume moved by T are the views
    composed with delta = T⁻¹."""
    Sh = np.eye(4)
    Sh[:3, 3] = -peer.shift

    def found():
        with torch.no_grad():
            D = delta_of(rot, xyz).matrix[0].double().numpy()
        return np.linalg.inv(Sh) @ np.linalg.inv(D) @ Sh

    def err():
        return mtre(found(), truth, shape, spacing) if truth is not None else float("nan")

    rot = torch.zeros(1, 3, requires_grad=True)
    xyz = torch.zeros(1, 3, requires_grad=True)
    sim = MultiscaleNormalizedCrossCorrelation2d([None, 9], [0.5, 0.5])
    full = torch.from_numpy(target)[:, None]
    spent, cpu, steps, e = 0.0, 0.0, 0, err()
    trace = [(0, 0, 0.0, None, e)]
    for lv, (scale, budget) in enumerate(a.levels):
        # Coarse to fine as xvr does it: the detector rescaled in place (DRR.rescale_detector_),
        # the target averaged over the same blocks of pixels.
        k = round(1 / scale)
        tgt = torch.nn.functional.avg_pool2d(full, k) if k > 1 else full
        peer.drr.rescale_detector_(scale)
        opt = torch.optim.Adam([{"params": [rot], "lr": a.lr_rot}, {"params": [xyz], "lr": a.lr_xyz}], maximize=True)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", patience=10, threshold=1e-4)
        n = 0
        while n < budget and steps < a.max_steps and not e < 1.0:
            c0, t0 = time.process_time(), time.perf_counter()
            opt.zero_grad()
            img = peer.render(delta_of(rot, xyz), **peer.kwargs)[:, None]
            loss = sim(tgt, img).mean()
            loss.backward()
            opt.step()
            sched.step(loss.item())
            spent += time.perf_counter() - t0
            cpu += time.process_time() - c0
            steps += 1
            n += 1
            e = err()
            trace.append((steps, lv, spent, loss.item(), e))
            if steps % 25 == 0:
                log(f"  diffdrr step {steps} ({tgt.shape[-2]}x{tgt.shape[-1]}): loss {loss.item():.5f} mTRE {e:.3f} mm, {spent:.1f}s")
        peer.drr.rescale_detector_(1 / scale)
    return {"seconds": spent, "cpu_s": cpu, "steps": steps, "mtre": e, "converged": e < 1.0, "matrix": found().tolist(),
            "levels": [{"scale": sc, "max_steps": b} for sc, b in a.levels],
            "trace": [{"step": s, "level": lv, "seconds": t, "loss": l, "mtre": m} for s, lv, t, l, m in trace]}


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tl", default="tapeloop", help="the tapeloop binary")
    ap.add_argument("--volume", required=True)
    ap.add_argument("--shape", required=True, help="X,Y,Z")
    ap.add_argument("--spacing", required=True, help="sx,sy,sz mm")
    ap.add_argument("--dtype", default="int16")
    ap.add_argument("--order", default="xyz", choices=["xyz", "zyx"])
    ap.add_argument("--hu", action="store_true")
    ap.add_argument("--mu-water", type=float, default=0.02)
    ap.add_argument("--geometry", required=True, help="geometry.json as tapeloop drr writes it")
    ap.add_argument("--views", default="0,1", help="the poses of --geometry to use")
    ap.add_argument("--target", help="register once to this (P, R, C) .npy of line integrals and stop")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--lr-rot", type=float, default=1e-2)
    ap.add_argument("--lr-xyz", type=float, default=1e0)
    ap.add_argument("--levels", default="0.25:150,0.5:150",
                    help="DiffDRR's coarse-to-fine levels while registering: scale:steps,… (detector rescaled by scale)")
    ap.add_argument("--renderer", default="trilinear", choices=["siddon", "trilinear"], help="DiffDRR's renderer while registering")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: forward,grad,register")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    skip = set(s for s in a.skip.split(",") if s)
    a.levels = [(float(x.split(":")[0]), int(x.split(":")[1])) for x in a.levels.split(",")]

    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(True)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    spacing = np.array([float(s) for s in a.spacing.split(",")])
    vol = load_volume(a)
    shape = vol.shape
    geo = json.load(open(a.geometry))
    poses = [geo["poses"][int(i)] for i in a.views.split(",")]
    work = tempfile.mkdtemp(prefix="diffdrr_register.")
    geom = os.path.join(work, "views.json")
    json.dump({"frame": geo.get("frame", "lps"), "poses": poses}, open(geom, "w"))

    res = {"command": " ".join(sys.argv), "torch": torch.__version__, "threads": torch.get_num_threads(),
           "views": len(poses), "rows": poses[0]["rows"], "cols": poses[0]["cols"],
           "volume_shape": list(shape), "spacing": list(spacing)}
    peers = {"siddon": Peer(vol, spacing, poses, "siddon"), "trilinear": Peer(vol, spacing, poses, "trilinear")}

    # The mapping: DiffDRR's rays against tapeloop's pixel centres, then both renders.
    s, t = peers["siddon"].rays()
    want = np.stack([pixel_centres(p).reshape(-1, 3) for p in poses])
    res["mapping"] = {"max_source_error_mm": float(np.abs(s[:, 0] - np.array([p["source"] for p in poses])).max()),
                      "max_pixel_error_mm": float(np.abs(t - want).max())}
    res["check"] = {}
    for m, peer in peers.items():
        with torch.no_grad():
            dd = peer.render().numpy().astype(np.float64)
        _, _, tl = tl_drr(a, geom, m, os.path.join(work, "check_" + m))
        res["check"][m] = {"ncc": ncc(dd, tl), "max_rel_diff": float(np.abs(dd - tl).max() / np.abs(tl).max()),
                           "mean_abs_rel_diff": float(np.abs(dd - tl).mean() / np.abs(tl).mean())}
    log(f"mapping {res['mapping']}\ncheck {res['check']}")

    if a.target:
        tgt = np.load(a.target).astype(np.float32)
        r = diffdrr_register(peers[a.renderer], tgt, None, shape, spacing, a, log)
        res["register_target"] = r
        json.dump(res, open(a.out, "w"), indent=1)
        return

    if "forward" not in skip:
        res["forward"] = {}
        for m, peer in peers.items():
            d, dc, tw, tr, tc = [], [], [], [], []
            with torch.no_grad():
                peer.render()  # warm-up
            for _ in range(a.repeats):
                with torch.no_grad():
                    c0, t0 = time.process_time(), time.perf_counter()
                    peer.render()
                    d.append(time.perf_counter() - t0)
                    dc.append(time.process_time() - c0)
                w, b, _ = tl_drr(a, geom, m, os.path.join(work, "fwd_" + m))
                tw.append(w)
                tr.append(b)
                tc.append(CPU["tapeloop"])
            res["forward"][m] = {"diffdrr_s": stats(d), "diffdrr_cpu_s": stats(dc), "tapeloop_process_s": stats(tw),
                                 "tapeloop_render_s": stats(tr), "tapeloop_process_cpu_s": stats(tc)}
            json.dump(res, open(a.out, "w"), indent=1)
            log(f"forward {m}: diffdrr min {min(d):.3f}s, tapeloop render min {min(tr):.3f}s (process {min(tw):.3f}s)")

    # Targets: truths drawn as tapeloop's experiment draws them, rendered by tapeloop's Siddon.
    rng = np.random.default_rng(a.seed)
    c = (np.array(shape) - 1) / 2 * spacing
    truths = []
    for k in range(a.starts):
        ax = rng.standard_normal(3)
        ang = rng.uniform() * math.radians(10)
        w = ax / np.linalg.norm(ax) * ang
        tr = rng.uniform(-1, 1, 3) * 10 / math.sqrt(3)
        T = about(rotvec_matrix(w), tr, c)
        g = os.path.join(work, f"truth{k}.json")
        json.dump({"frame": geo.get("frame", "lps"), "poses": seen_from(poses, T)}, open(g, "w"))
        _, _, img = tl_drr(a, g, "siddon", os.path.join(work, f"truth{k}"))
        img = img.astype(np.float64)
        img += a.noise * img.std() * rng.standard_normal(img.shape)
        tp = os.path.join(work, f"target{k}.npy")
        np.save(tp, img.astype(np.float32))
        truths.append({"T": T, "target": tp, "rotation_deg": math.degrees(ang), "translation_mm": tr.tolist()})

    if "register" not in skip:
        res["register"] = []
        for k, tr in enumerate(truths):
            T = tr["T"]
            start = mtre(np.eye(4), T, shape, spacing)
            out = os.path.join(work, f"reg{k}")
            rep = out + ".json"
            w, p = run([a.tl, "register", *tl_volume_flags(a), "--geometry", geom, "--target", tr["target"],
                        "--out", out, "--report", rep, "-q"])
            r = json.load(open(rep))
            Trec = np.array(r["transform"]["matrix"])
            tl_res = {"process_s": w, "process_cpu_s": CPU["tapeloop"], "seconds": r["seconds"], "steps": r["steps"], "evaluations": r["evaluations"],
                      "mtre": mtre(Trec, T, shape, spacing), "converged": r["converged"], "exit": p.returncode}
            log(f"start {k} ({tr['rotation_deg']:.2f}°, {np.linalg.norm(tr['translation_mm']):.2f} mm, mTRE {start:.2f} mm): tapeloop {tl_res['mtre']:.3f} mm in {w:.1f}s")
            dd = diffdrr_register(peers[a.renderer], np.load(tr["target"]), T, shape, spacing, a, log)
            log(f"  diffdrr ({a.renderer}) {dd['mtre']:.3f} mm in {dd['seconds']:.1f}s, {dd['steps']} steps")
            res["register"].append({"start_mtre_mm": start, "rotation_deg": tr["rotation_deg"], "translation_mm": tr["translation_mm"],
                                    "tapeloop": tl_res, "diffdrr": dd})
            json.dump(res, open(a.out, "w"), indent=1)
    if "grad" not in skip:
        res["grad"] = {}
        tgt = torch.from_numpy(np.load(truths[0]["target"]))[:, None]
        sim = NormalizedCrossCorrelation2d()
        for m, peer in peers.items():
            d, dc, tw, te, tc = [], [], [], [], []
            for i in range(a.repeats):
                rot = torch.zeros(1, 3, requires_grad=True)
                xyz = torch.zeros(1, 3, requires_grad=True)
                c0, t0 = time.process_time(), time.perf_counter()
                loss = sim(tgt, peer.render(delta_of(rot, xyz))[:, None]).mean()
                loss.backward()
                d.append(time.perf_counter() - t0)
                dc.append(time.process_time() - c0)
                out = os.path.join(work, "grad_" + m)
                rep = out + ".json"
                w, _ = run([a.tl, "register", *tl_volume_flags(a), "--geometry", geom, "--target", truths[0]["target"],
                            "--method", m, "--levels", "1", "--max-steps", "3", "--out", out, "--report", rep, "-q"])
                r = json.load(open(rep))
                tw.append(w)
                tc.append(CPU["tapeloop"])
                te.append((r["seconds"] - r["build_seconds"]) / r["evaluations"])
            res["grad"][m] = {"diffdrr_s": stats(d), "diffdrr_cpu_s": stats(dc), "tapeloop_per_evaluation_s": stats(te),
                              "tapeloop_process_s_3_steps": stats(tw), "tapeloop_process_cpu_s_3_steps": stats(tc)}
            json.dump(res, open(a.out, "w"), indent=1)
            log(f"grad {m}: diffdrr min {min(d):.3f}s, tapeloop per evaluation min {min(te):.3f}s")

    json.dump(res, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
