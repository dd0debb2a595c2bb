#!/usr/bin/env python3
"""tapeloop against the NumPy/SciPy peers on the same generated inputs.

For each workload: write the inputs once (.npy, fixed seeds), run tapeloop's
CLI on them and the peer script in bench/peers on the same files, each as
its own process, and print one table row: the time per unit of work (one
sweep, one matrix, one DRR, one combination), the ratio, each process's
peak resident set (from wait4, the same measure for both), and the largest
difference between the two results relative to the largest result.

Usage: compare.py TAPELOOP [--quick] [--markdown FILE]. `make compare` runs
it; --quick uses small sizes (a smoke test).
"""
import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "--helper":
    import numpy as np  # only the helpers load NumPy: the driver stays small

PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers")


def peak(cmd):
    """Runs cmd, returning (stdout, peak RSS in bytes of that process)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"compare: {shlex.join(cmd)} failed with status {p.returncode}")
    return out.decode(), ru.ru_maxrss * 1024


def rel_diff(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        sys.exit(f"compare: result shapes differ: {got.shape} vs {want.shape}")
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-300))


# The driver itself stays small: a child's peak RSS as wait4 reports it
# starts from the parent's (the child begins as a copy of it), so inputs
# are generated and results compared in helper processes.
def helper(name, *args):
    out, _ = peak([sys.executable, os.path.abspath(__file__), "--helper", name, *map(str, args)])
    return json.loads(out) if out.strip() else None


def diff_files(t, p):
    """Largest difference of two .npy or statistics-CSV results."""
    if t.endswith(".csv"):
        load = lambda f: np.loadtxt(f, delimiter=",", skiprows=1)[:, 3:]  # noqa: E731
        a, b = load(t), load(p)
        return max(rel_diff(a[:, i], b[:, i]) for i in range(a.shape[1]))
    return rel_diff(np.load(t), np.load(p))


def timed(tl, args, d):
    """tapeloop's seconds for a run without output (the work alone, as the
    peers time it), then the run that writes the result: its peak RSS."""
    peak([tl, *args, "--report", f"{d}/r.json", "-q"])
    return report(f"{d}/r.json")["total_seconds"]


def report(path):
    with open(path) as f:
        return json.load(f)


def interp(tl, d, quick):
    m, g, n = (300, 4096, 1_000_000) if not quick else (30, 512, 20_000)
    helper("gen-interp", d, m, g, n)
    args = ["interp", "-f", f"{d}/f.npy", "-x", f"{d}/x.npy"]
    tsec = timed(tl, args, d)
    _, rss = peak([tl, *args, "--out", f"{d}/t.npy", "-q"])
    pout, prss = peak([sys.executable, f"{PEERS}/interp_numpy.py", "--f", f"{d}/f.npy", "--x", f"{d}/x.npy",
                       "--out", f"{d}/p.npy", "--repeat", "1"])
    psec = json.loads(pout)["seconds"]
    return dict(workload="interp (sumsq)", size=f"M={m} G={g} N={n:,}", peer="NumPy, chunked",
                unit="s/sweep", peer_s=psec, tl_s=tsec, peer_rss=prss, tl_rss=rss,
                diff=helper("diff", f"{d}/t.npy", f"{d}/p.npy"))


def affinity(tl, d, quick, metric):
    if metric == "dot":
        n, h, w = (10_000, 64, 64) if not quick else (300, 16, 16)
        dtype, peer = "float32", "NumPy x @ x.T (OpenBLAS)"
    else:
        n, h, w = (2000, 64, 64) if not quick else (200, 8, 8)
        dtype, peer = "uint8", "SciPy cdist"
    helper("gen-images", d, n, h, w, dtype)
    args = ["affinity", "--images", f"{d}/img.npy", "--metric", metric]
    tsec = timed(tl, args, d)
    _, rss = peak([tl, *args, "--out", f"{d}/t.npy", "-q"])
    pout, prss = peak([sys.executable, f"{PEERS}/affinity_numpy.py", "--images", f"{d}/img.npy",
                       "--metric", metric, "--out", f"{d}/p.npy"])
    return dict(workload=f"affinity ({metric})", size=f"N={n:,} D={h * w:,} {dtype}", peer=peer,
                unit="s/matrix", peer_s=json.loads(pout)["seconds"], tl_s=tsec, peer_rss=prss, tl_rss=rss,
                diff=helper("diff", f"{d}/t.npy", f"{d}/p.npy"))


def smooth_volume(n, seed):
    """A sum of random Gaussian blobs: a smooth (X, Y, Z) volume."""
    rng = np.random.default_rng(seed)
    ax = np.arange(n, dtype=np.float32)
    v = np.zeros((n, n, n), np.float32)
    for _ in range(12):
        c, r = rng.uniform(0.2 * n, 0.8 * n, 3), rng.uniform(0.05 * n, 0.2 * n)
        gx, gy, gz = (np.exp(-((ax - c[i]) / r) ** 2 / 2) for i in range(3))
        v += rng.uniform(0.005, 0.02) * gx[:, None, None] * gy[None, :, None] * gz[None, None, :]
    return v


def drr(tl, d, quick):
    n, poses, det = (256, 8, "200x200") if not quick else (32, 2, "40x40")
    helper("gen-volume", d, n)
    geo = ["--spacing", "1,1,1", f"--origin={-n / 2},{-n / 2},{-n / 2}", "--orbit", str(poses),
           "--detector", det, "--pixel", "2"]
    args = ["drr", "--volume", f"{d}/vol.npy", "--method", "trilinear", *geo]
    tsec = timed(tl, args, d) / poses
    _, rss = peak([tl, *args, "--out", f"{d}/t", "-q"])
    pout, prss = peak([sys.executable, f"{PEERS}/drr_numpy.py", "--volume", f"{d}/vol.npy", *geo,
                       "--out", f"{d}/p.npy"])
    return dict(workload="DRR (trilinear, 0.5 mm)", size=f"{n}³, {poses} poses {det}", peer="NumPy, per pose",
                unit="s/DRR", peer_s=json.loads(pout)["seconds"], tl_s=tsec, peer_rss=prss, tl_rss=rss,
                diff=helper("diff", f"{d}/t/drr.npy", f"{d}/p.npy"))


def wavelet(tl, d, quick):
    n, th, ph, xi = (128, "0:pi:4", "0:pi:2", "1,2") if not quick else (16, "0:pi:2", "0.5", "1,2")
    helper("gen-noise", d, n)
    grid = ["--theta", th, "--phi", ph, "--xi", xi, "--boundary", "reflect"]
    args = ["wavelet", "--volume", f"{d}/wvol.npy", *grid]
    tsec = timed(tl, args, d)
    _, rss = peak([tl, *args, "--out", f"{d}/t.csv", "-q"])
    pout, prss = peak([sys.executable, f"{PEERS}/wavelet_scipy.py", "--volume", f"{d}/wvol.npy", *grid,
                       "--out", f"{d}/p.csv"])
    p = json.loads(pout)
    return dict(workload="wavelet (reflect)", size=f"{n}³, {p['combinations']} combinations",
                peer="SciPy fftconvolve", unit="s/combination", peer_s=p["seconds"],
                tl_s=tsec / p["combinations"], peer_rss=prss, tl_rss=rss,
                diff=helper("diff", f"{d}/t.csv", f"{d}/p.csv"))


def mib(b):
    return f"{b / 2**20:.0f} MiB"


def run_helper(name, args):
    d = args[0]
    if name == "gen-interp":
        m, g, n = map(int, args[1:])
        rng = np.random.default_rng(11)
        np.save(f"{d}/f.npy", np.cumsum(rng.standard_normal((m, g)), axis=1).astype(np.float32))
        np.save(f"{d}/x.npy", rng.uniform(-0.05, 1.05, n).astype(np.float32))
    elif name == "gen-images":
        n, h, w = map(int, args[1:4])
        rng = np.random.default_rng(12)
        if args[4] == "uint8":
            x = rng.integers(0, 256, (n, h, w), dtype=np.uint8)
        else:
            x = rng.standard_normal((n, h, w), dtype=np.float32)
        np.save(f"{d}/img.npy", x)
    elif name == "gen-volume":
        np.save(f"{d}/vol.npy", smooth_volume(int(args[1]), 14))
    elif name == "gen-noise":
        n = int(args[1])
        np.save(f"{d}/wvol.npy", np.random.default_rng(15).standard_normal((n, n, n)).astype(np.float32))
    elif name == "diff":
        print(json.dumps(diff_files(args[0], args[1])))
    elif name == "version":
        print(json.dumps(np.__version__))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--helper":
        return run_helper(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("tapeloop")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    tl = os.path.abspath(args.tapeloop)
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tapeloop-compare-") as d:
        for job in (lambda: interp(tl, d, args.quick), lambda: affinity(tl, d, args.quick, "dot"),
                    lambda: affinity(tl, d, args.quick, "l1"), lambda: drr(tl, d, args.quick),
                    lambda: wavelet(tl, d, args.quick)):
            rows.append(job())
            r = rows[-1]
            print(f"  {r['workload']}: peer {r['peer_s']:.4g} {r['unit']}, tapeloop {r['tl_s']:.4g}", file=sys.stderr)
    head = ["workload", "size", "peer", "peer time", "tapeloop time", "ratio", "peer peak RSS",
            "tapeloop peak RSS", "max rel. diff"]
    lines = []
    for r in rows:
        lines.append([r["workload"], r["size"], r["peer"], f"{r['peer_s']:.4g} {r['unit']}",
                      f"{r['tl_s']:.4g} {r['unit']}", f"{r['peer_s'] / r['tl_s']:.1f}×", mib(r["peer_rss"]),
                      mib(r["tl_rss"]), f"{r['diff']:.1e}"])
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)))
    took = time.perf_counter() - t0
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, NumPy {helper('version', '-')}"
    print(f"({machine}; {took:.0f} s in all)")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"Machine: {machine}. Date: {time.strftime('%Y-%m-%d')}. Took {took:.0f} s.\n\n")
            f.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
            for line in lines:
                f.write("| " + " | ".join(line) + " |\n")
    bad = [r["workload"] for r in rows if not r["diff"] <= 1e-4]
    if bad:
        sys.exit(f"compare: results differ by more than 1e-4 for {', '.join(bad)}")


if __name__ == "__main__":
    main()
