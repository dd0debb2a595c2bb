#!/usr/bin/env python3
"""The Python package in process (python/tapeloop) against the same work in
Go and through the CLI: what calling the engine from Python costs, and what
it saves over a CLI round trip.

Run from the repository root, after `make build python`:

    /usr/bin/python3 bench/python_inproc.py bin/tapeloop

(it puts python/ on sys.path itself; --rounds-call (default 15), --rounds
(default 7), --only and --json FILE change what it runs and keep the raw
figures; --python DIR and --graphs-test FILE take the package and the
test binary from elsewhere, e.g. copies built together while the tree is
being edited; about two minutes on 2 cores). It builds the
graphs/affinity package's test binary once (`go test -c`), writes every input once
(fixed seeds) into a temporary directory, and prints one Markdown table.
Each row's two sides run in the same minutes, interleaved (the order
alternating round by round), and every speed is quoted as a ratio of the
two, minimum and median over the rounds: the machine is shared and its
speed drifts by ±20 % over minutes.

The rows (the name in brackets is --only's):

1. Per call [call]. Go: `affinity.test -test.run '^$' -test.bench
   AffinityProgram64x1024$ -test.benchtime 1000x`
   (BenchmarkAffinityProgram64x1024 in graphs/affinity/program_bench_test.go:
   affinity.Compile of dot, float32, 64 images of 1024 values, no top-k
   or column images, one call outside the loop, then 1,000 calls of
   p.Run(x, nil, dst, nil, nil)): its ns/op (the mean call) and its
   median-ns/call (each call timed on its own). Python: a fresh
   tapeloop.Affinity(shape=(64, 1024)) each round, one warm-up call on a
   fresh random (64, 1024) float32 batch, then 1,000 calls r(x, out=out) on
   that batch, timed as a whole (the mean call) and each on its own (the
   median call; the two perf_counter reads add about 0.1 µs). Quoted:
   Python/Go per call (target ≤ 1.1) and the overhead per call, Python's
   minus Go's (target ≤ 50 µs), of the means (ns/op is a mean) and of the
   medians (what other tenants' bursts move least). A second estimate:
   Python's median call minus the median the object's own report() gives
   (summary.median_ms); that report times the replay only, not the copy
   of the images into the program's buffers that comes before it, so the
   Go benchmark of that copy alone (BenchmarkAffinityReload64x1024, ns/op)
   is quoted beside it and subtracted too.
2. DRR loop [drr]: a 360-pose orbit of a 96³ volume (smooth random, float32,
   saved as .npy) onto 128×128. CLI: `tapeloop drr --volume v.npy --orbit
   360 --detector 128x128 -q` (no --out: the CLI renders every image and
   keeps none of them), the process's wall time. Python:
   `r = tapeloop.DRR(np.load("v.npy"), detector=(128, 128))`, then
   `for p in r.orbit(360): r(p)`, one pose per call, each image a new array,
   timed from np.load through the last call. Ratio Python/CLI (target ≤
   1.05). The next row is the same with r(r.orbit(360)): all 360 poses in
   one call.
3. Round trip / in process [rt]: a CLI round trip against the in-process one-shot
   function, at the demo's sizes (internal/filejob/demo.go; the demo's own data are
   built into the CLI, so these are generated here): interp sumsq, M = 300
   rows of x² on G = 4096 points, N = 10⁶ uniform float32 queries; affinity
   l1, N = 2000 standard-normal 64×64 float32 images; DRR siddon, the
   volume of row 2, a 72-pose orbit onto 128²; wavelet, a 24³
   standard-normal float32 volume, wrap, θ over 8 and φ over 4 steps of
   [0, π), ξ ∈ {1, 2}, a = 1 (given to the CLI as lists of the same
   float64 values). Round trip: np.save of the inputs into a fresh
   directory, the CLI with --out into it, np.load (the wavelet: the CSV
   read back) of the output. In process: tapeloop.interp(f, x) /
   affinity(X, "l1") / drr(v, orbit=72, detector=(128, 128)) /
   wavelet(v, θ, φ, ξ, boundary="wrap") on the same arrays in memory,
   compile included. Ratio round trip / in process (target > 1). The last
   round's outputs are compared: bit-identical expected for interp,
   affinity and DRR; the wavelet's statistics to the CSV's printed
   precision (Go's shortest float64 form: bit-identical too).
   Both sides plan their blocks under the same default memory limit; the
   demo's fixed batches (interp 2¹⁴, affinity block 50, DRR and wavelet 2)
   are not imposed on either.
4. Peak RSS [rss]: peak resident set (ru_maxrss), median of --rounds runs
   of each: Python is a fresh `/usr/bin/python3 -c` that imports numpy and
   tapeloop, np.load's the inputs, makes the one-shot call of row 3 and
   prints getrusage(RUSAGE_SELF).ru_maxrss; the baseline is the same
   process without the call (import numpy and tapeloop, np.load the
   inputs, nothing else); the CLI is the round trip's command of row 3
   (with --out), its peak read by `/usr/bin/time -f %M` (wait4's rusage of
   its one child). Every one of these processes is started by
   /usr/bin/time, never forked from this driver: Linux hands a forked
   child its parent's resident set as its starting high-water mark, and
   keeps it across exec, so anything forked from this process (over 200
   MiB once the inputs are made) would report at least that. Target:
   Python ≤ CLI + baseline.

A workload the package lacks (an older package without tapeloop.wavelet)
is left out of rows 3 and 4 with a note.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYDIR = os.path.join(ROOT, "python")  # where the tapeloop package is imported from (--python)
tapeloop = None  # imported by main, from PYDIR

CALLS = 1000
SHAPE = (64, 1024)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def mn_med(xs):
    return min(xs), statistics.median(xs)


def fmt(x, unit="", digits=3):
    if abs(x) >= 100:
        s = f"{x:.0f}"
    else:
        s = f"{x:.{digits}g}"
    return s + unit


def pair(xs, unit="", digits=3):
    a, b = mn_med(xs)
    return f"{fmt(a, unit, digits)} / {fmt(b, unit, digits)}"


def measured(args):
    """Run args and return (wall seconds, stdout, the child's peak RSS in
    KiB). The child is started by /usr/bin/time (-f %M), not from this
    process: a child forked from a large process starts with that
    process's resident set as its own high-water mark (Linux copies it at
    fork and keeps it across exec), so its ru_maxrss, from wait4 or from
    itself, would be at least this driver's. Without /usr/bin/time, a
    small Python launcher (no NumPy) forks it and reads wait4."""
    fd, rss = tempfile.mkstemp(suffix=".rss")
    os.close(fd)
    if os.access("/usr/bin/time", os.X_OK):
        pre = ["/usr/bin/time", "-f", "%M", "-o", rss]
    else:
        pre = ["/usr/bin/python3", "-S", "-c",
               "import os, sys\n"
               "pid = os.fork()\n"
               "if pid == 0:\n    os.execv(sys.argv[2], sys.argv[2:])\n"
               "_, st, ru = os.wait4(pid, 0)\n"
               "open(sys.argv[1], 'w').write(str(ru.ru_maxrss))\n"
               "sys.exit(os.waitstatus_to_exitcode(st))\n", rss]
    t0 = time.perf_counter()
    p = subprocess.run(pre + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t = time.perf_counter() - t0
    try:
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, args))}: exit {p.returncode}: {p.stderr}")
        with open(rss) as f:
            kib = int(f.read().split()[-1])
    finally:
        os.unlink(rss)
    return t, p.stdout, kib


def run_cli(args):
    """Run the CLI, its output discarded; return its wall time (s)."""
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


# --- 1: per-call overhead -------------------------------------------------------------------

def go_bench(testbin, name):
    """Run one benchmark of the test binary for CALLS iterations; return its
    ns/op and (when it reports one) its median-ns/call, in seconds."""
    out = subprocess.run([testbin, "-test.run", "^$", "-test.bench", name + "$", "-test.benchtime", f"{CALLS}x"],
                         capture_output=True, text=True, check=True, cwd=os.path.join(ROOT, "graphs", "affinity")).stdout
    line = re.search(r"^Benchmark" + name + r"\S*\s+\d+\s+(.*)$", out, re.M)
    if not line:
        raise RuntimeError(f"no result for {name} in:\n{out}")
    metrics = {unit: float(v) * 1e-9 for v, unit in re.findall(r"([\d.]+) (\S+)", line.group(1))}
    return metrics["ns/op"], metrics.get("median-ns/call")


def py_calls(seed):
    x = np.random.default_rng(seed).standard_normal(SHAPE, dtype=np.float32)
    out = np.empty((SHAPE[0], SHAPE[0]), np.float32)
    each = [0.0] * CALLS
    pc = time.perf_counter
    with tapeloop.Affinity(shape=SHAPE) as r:
        r(x, out=out)  # warm-up, as the Go benchmark's call before its loop
        t0 = pc()
        for i in range(CALLS):
            a = pc()
            r(x, out=out)
            each[i] = pc() - a
        total = pc() - t0
        rep = r.report()
    x64 = x.astype(np.float64)
    ref = np.einsum("ik,jk->ij", x64, x64)  # NumPy's own loops: OpenBLAS's threads stay asleep
    err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
    return total / CALLS, statistics.median(each), rep["summary"]["median_ms"] * 1e-3, rep["calls"], err


def row_call(testbin, rounds):
    go, gomed, py, pymed, repmed, reload = [], [], [], [], [], []
    for k in range(rounds):
        for side in ("go", "py") if k % 2 == 0 else ("py", "go"):
            if side == "go":
                mean, med = go_bench(testbin, "AffinityProgram64x1024")
                go.append(mean), gomed.append(med)
            else:
                t, med, rmed, calls, err = py_calls(100 + k)
                py.append(t), pymed.append(med), repmed.append(rmed)
                if calls != CALLS + 1 or err > 1e-5:
                    raise RuntimeError(f"affinity calls {calls}, relative error {err}")
        reload.append(go_bench(testbin, "AffinityReload64x1024")[0])
        log(f"call round {k + 1}: go mean {go[-1] * 1e6:.1f} µs median {gomed[-1] * 1e6:.1f}; python mean "
            f"{py[-1] * 1e6:.1f} median {pymed[-1] * 1e6:.1f}; report median {repmed[-1] * 1e6:.1f}; "
            f"reload {reload[-1] * 1e6:.1f}")
    us = lambda xs: [v * 1e6 for v in xs]  # noqa: E731
    ratio = [p / g for p, g in zip(py, go)]
    over = [(p - g) * 1e6 for p, g in zip(py, go)]
    ratio_med = [p / g for p, g in zip(pymed, gomed)]
    over_med = [(p - g) * 1e6 for p, g in zip(pymed, gomed)]
    over2 = [(p - g) * 1e6 for p, g in zip(pymed, repmed)]
    rest = [o - r * 1e6 for o, r in zip(over2, reload)]
    rows = [
        ["per call, 64×1024 dot, mean of 1,000 calls (out=)", pair(us(py), " µs"),
         f"Go benchmark, ns/op: {pair(us(go), ' µs')}", pair(ratio), "≤ 1.1", verdict(ratio, lambda v: v <= 1.1)],
        ["overhead per call, Python − Go, means", "", "", pair(over, " µs"), "≤ 50 µs",
         verdict(over, lambda v: v <= 50)],
        ["per call, median of the same 1,000 calls", pair(us(pymed), " µs"),
         f"Go benchmark, median-ns/call: {pair(us(gomed), ' µs')}", pair(ratio_med), "≤ 1.1",
         verdict(ratio_med, lambda v: v <= 1.1)],
        ["overhead per call, Python − Go, medians", "", "", pair(over_med, " µs"), "≤ 50 µs",
         verdict(over_med, lambda v: v <= 50)],
        ["overhead per call, 2nd estimate: Python's median call − report()'s median_ms", pair(us(pymed), " µs"),
         f"report: {pair(us(repmed), ' µs')}; the copy-in it leaves out (Go): {pair(us(reload), ' µs')}",
         pair(over2, " µs") + f"; less the copy-in: {pair(rest, ' µs')}", "(reported)", ""],
    ]
    return rows, dict(go_mean=go, go_median=gomed, py_mean=py, py_median=pymed, report_median=repmed, reload=reload,
                      overhead_mean_us=over, overhead_median_us=over_med, overhead_report_us=over2)


def verdict(xs, ok):
    lo, med = mn_med(xs)
    if ok(med) and ok(lo):
        return "met"
    if ok(med):
        return "met by the median, not the min"
    if ok(lo):
        return "met by the min, missed by the median"
    return "missed"


# --- inputs ---------------------------------------------------------------------------------

def smooth_volume(n, seed):
    """A smooth positive random volume, μ per mm like tissue (about 0.02)."""
    rng = np.random.default_rng(seed)
    v = rng.random((n, n, n))
    for ax in range(3):  # a box filter of width 9 along each axis, periodic
        c = np.cumsum(np.concatenate([v, v.take(range(8), axis=ax)], axis=ax), axis=ax)
        lo = np.concatenate([np.zeros_like(v.take([0], axis=ax)), c.take(range(n - 1), axis=ax)], axis=ax)
        v = (c.take(range(8, n + 8), axis=ax) - lo) / 9
    return (0.02 * v / v.mean()).astype(np.float32)


def inputs(tmp):
    rng = np.random.default_rng(1)
    g, m, n = 4096, 300, 1_000_000
    grid = np.linspace(0, 1, g)
    ins = {
        "interp": {"f": np.ascontiguousarray(np.broadcast_to(grid ** 2, (m, g))),
                   "x": rng.random(n, dtype=np.float32)},
        "affinity": {"X": rng.standard_normal((2000, 64, 64), dtype=np.float32)},
        "drr": {"v": smooth_volume(96, 2)},
        "wavelet": {"w": rng.standard_normal((24, 24, 24), dtype=np.float32)},
    }
    d = os.path.join(tmp, "inputs")
    os.makedirs(d)
    for arrs in ins.values():
        for k, a in arrs.items():
            np.save(os.path.join(d, k + ".npy"), a)
    return ins, d


THETA = [float(v) for v in np.arange(8) * np.pi / 8]
PHI = [float(v) for v in np.arange(4) * np.pi / 4]
XI = [1.0, 2.0]


def cli_args(tb, w, d, out):
    """The CLI command of workload w on the .npy inputs in d, --out into out
    (None: no output), and the path of what it writes."""
    p = lambda k: os.path.join(d, k + ".npy")  # noqa: E731
    if w == "interp":
        a, res = [tb, "interp", "-f", p("f"), "-x", p("x"), "-q"], os.path.join(out or "", "y.npy")
    elif w == "affinity":
        a, res = [tb, "affinity", "--images", p("X"), "--metric", "l1", "-q"], os.path.join(out or "", "A.npy")
    elif w == "drr":
        a, res = [tb, "drr", "--volume", p("v"), "--orbit", "72", "--detector", "128x128", "-q"], \
            os.path.join(out or "", "drr.npy")
    else:
        a = [tb, "wavelet", "--volume", p("w"), "--boundary", "wrap", "-a", "1",
             "--theta", ",".join(map(repr, THETA)), "--phi", ",".join(map(repr, PHI)),
             "--xi", ",".join(map(repr, XI)), "-q"]
        res = os.path.join(out or "", "w.csv")
    if out is not None:
        a += ["--out", out if w == "drr" else res]
    return a, res


def read_csv(path):
    with open(path) as f:
        head = f.readline().strip().split(",")
        rows = np.array([[float(v) for v in line.split(",")] for line in f if line.strip()])
    return {k: rows[:, i] for i, k in enumerate(head)}


# the one-shot calls, as source text: run here and in the fresh processes of row 4
CALL = {
    "interp": "tapeloop.interp(I['f'], I['x'])",
    "affinity": "tapeloop.affinity(I['X'], 'l1')",
    "drr": "tapeloop.drr(I['v'], orbit=72, detector=(128, 128))",
    "wavelet": f"tapeloop.wavelet(I['w'], {THETA!r}, {PHI!r}, {XI!r}, a=1.0, boundary='wrap')",
}
NAMES = {"interp": ["f", "x"], "affinity": ["X"], "drr": ["v"], "wavelet": ["w"]}
SIZES = {"interp": "sumsq M=300 G=4096 N=10⁶", "affinity": "l1 N=2000 64×64", "drr": "siddon 96³ 72 poses 128²",
         "wavelet": "24³ wrap 8θ×4φ×2ξ"}


def have(w):
    return hasattr(tapeloop, w)


# --- 2: the DRR loop ------------------------------------------------------------------------

def row_drr_loop(tb, d, rounds):
    v = os.path.join(d, "v.npy")
    cli, loop, one = [], [], []
    agree = None
    for k in range(rounds):
        sides = ["cli", "loop", "one"]
        if k % 2:
            sides.reverse()
        for s in sides:
            if s == "cli":
                cli.append(run_cli([tb, "drr", "--volume", v, "--orbit", "360", "--detector", "128x128", "-q"]))
            elif s == "loop":
                t0 = time.perf_counter()
                r = tapeloop.DRR(np.load(v), detector=(128, 128))
                imgs = [r(p) for p in r.orbit(360)]
                loop.append(time.perf_counter() - t0)
                r.close()
            else:
                t0 = time.perf_counter()
                r = tapeloop.DRR(np.load(v), detector=(128, 128))
                all_ = r(r.orbit(360))
                one.append(time.perf_counter() - t0)
                r.close()
        agree = bool(np.array_equal(np.concatenate(imgs), all_))
        del imgs, all_
        log(f"drr round {k + 1}: cli {cli[-1]:.3f} s, loop {loop[-1]:.3f} s, one call {one[-1]:.3f} s")
    rl = [a / b for a, b in zip(loop, cli)]
    ro = [a / b for a, b in zip(one, cli)]
    note = "; one pose per call and all in one call bit-identical" if agree else "; the loop and the one call DIFFER"
    rows = [
        ["DRR loop: 360 poses 96³→128², one pose per call, from np.load", pair(loop, " s"),
         f"CLI, no --out: {pair(cli, ' s')}", pair(rl), "≤ 1.05", verdict(rl, lambda x: x <= 1.05) + note],
        ["DRR: the same 360 poses in one call, from np.load", pair(one, " s"), f"CLI, no --out: {pair(cli, ' s')}",
         pair(ro), "(reported)", ""],
    ]
    return rows, dict(cli=cli, loop=loop, one=one, loop_equals_one=agree)


# --- 3: round trip against in process -------------------------------------------------------

def round_trip(tb, w, I, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    t0 = time.perf_counter()
    for k in NAMES[w]:
        np.save(os.path.join(d, k + ".npy"), I[k])
    args, res = cli_args(tb, w, d, d)
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    out = read_csv(res) if w == "wavelet" else np.load(res)
    t = time.perf_counter() - t0
    shutil.rmtree(d)
    return t, out


def in_process(w, I):
    t0 = time.perf_counter()
    out = eval(CALL[w], {"tapeloop": tapeloop, "I": I})
    return time.perf_counter() - t0, out


def compare(w, a, b):
    """How the round trip's output a and the in-process output b agree."""
    if w == "wavelet":
        keys = [k for k in a if k in b]
        same = all(np.array_equal(a[k], np.asarray(b[k], np.float64)) for k in keys) and len(a) == len(b)
        worst = max(float(np.max(np.abs(a[k] - b[k]) / np.maximum(np.abs(a[k]), 1e-300))) for k in keys)
        return same, "bit-identical to the CSV's digits" if same else f"max rel. diff {worst:.1e} (columns {keys})"
    same = a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
    if same:
        return True, "bit-identical"
    diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
    return False, f"DIFFER: {a.shape} {a.dtype} against {b.shape} {b.dtype}, max abs diff {diff:.3g}"


def row_round_trip(tb, ins, tmp, rounds, works):
    rows, raw = [], {}
    for w in works:
        I = ins[w]
        rt, ip = [], []
        for k in range(rounds):
            for s in ("rt", "ip") if k % 2 == 0 else ("ip", "rt"):
                if s == "rt":
                    t, a = round_trip(tb, w, I, tmp)
                    rt.append(t)
                else:
                    t, b = in_process(w, I)
                    ip.append(t)
            log(f"round trip {w} round {k + 1}: CLI round trip {rt[-1]:.3f} s, in process {ip[-1]:.3f} s")
        ok, how = compare(w, a, b)
        del a, b
        r = [x / y for x, y in zip(rt, ip)]
        rows.append([f"round trip / in process: {w} ({SIZES[w]})", pair(ip, " s"),
                     f"CLI round trip: {pair(rt, ' s')}", pair(r), "> 1", verdict(r, lambda x: x > 1) + "; " + how])
        raw[w] = dict(round_trip=rt, in_process=ip, agree=ok, agreement=how)
    return rows, raw


# --- 4: peak RSS ----------------------------------------------------------------------------

def py_rss(w, d, call):
    """ru_maxrss (KiB) as a fresh Python process reports it of itself, and
    as /usr/bin/time reads it."""
    names = NAMES[w]
    code = (f"import sys; sys.path.insert(0, {PYDIR!r})\n"
            "import resource, numpy as np, tapeloop\n"
            f"I = {{k: np.load({d!r} + '/' + k + '.npy') for k in {names!r}}}\n"
            + (f"r = {CALL[w]}\n" if call else "")
            + "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    _, out, kib = measured(["/usr/bin/python3", "-c", code])
    return int(out.split()[-1]), kib


def row_rss(tb, d, tmp, rounds, works):
    rows, raw = [], {}
    mib = 1024.0
    for w in works:
        py, base, cli, py_time, base_time = [], [], [], [], []
        for k in range(rounds):
            s, t = py_rss(w, d, True)
            py.append(s), py_time.append(t)
            s, t = py_rss(w, d, False)
            base.append(s), base_time.append(t)
            o = tempfile.mkdtemp(dir=tmp)
            cli.append(measured(cli_args(tb, w, d, o)[0])[2])
            shutil.rmtree(o)
        p, b, c = (statistics.median(x) / mib for x in (py, base, cli))
        log(f"rss {w}: python {p:.1f} MiB, baseline {b:.1f} MiB, CLI {c:.1f} MiB")
        rows.append([f"peak RSS: {w} ({SIZES[w]})", f"{p:.0f} MiB (baseline {b:.0f} MiB)", f"CLI: {c:.0f} MiB",
                     f"Python − (CLI + baseline) = {p - c - b:+.0f} MiB", "Python ≤ CLI + baseline",
                     "met" if p <= c + b else "missed"])
        raw[w] = dict(python_kib=py, baseline_kib=base, cli_kib=cli, python_kib_time=py_time,
                      baseline_kib_time=base_time)
    return rows, raw


def main():
    global PYDIR, tapeloop
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tapeloop", help="the CLI, e.g. bin/tapeloop")
    ap.add_argument("--rounds-call", type=int, default=15, help="rounds of row 1 (default 15)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds of rows 2-4 (default 7)")
    ap.add_argument("--only", default="call,drr,rt,rss", help="rows to run: call, drr, rt, rss")
    ap.add_argument("--json", help="write the raw figures to this file")
    ap.add_argument("--python", default=PYDIR,
                    help="the directory holding the tapeloop package and its library (default: python/ here)")
    ap.add_argument("--graphs-test", help="the graphs/affinity package's test binary, built beforehand "
                    "(default: built now, `go test -c ./graphs/affinity`)")
    a = ap.parse_args()
    PYDIR = os.path.abspath(a.python)
    sys.path.insert(0, PYDIR)
    import tapeloop  # noqa: F811 (the module's global)
    tb = os.path.abspath(a.tapeloop)
    only = set(a.only.split(","))
    works = [w for w in ("interp", "affinity", "drr", "wavelet") if have(w)]
    missing = [w for w in ("interp", "affinity", "drr", "wavelet") if not have(w)]
    tmp = tempfile.mkdtemp(prefix="python_inproc.")
    rows, raw = [], {}
    try:
        if "call" in only:
            testbin = a.graphs_test and os.path.abspath(a.graphs_test)
            if not testbin:
                testbin = os.path.join(tmp, "affinity.test")
                subprocess.run(["go", "test", "-c", "-o", testbin, "./graphs/affinity"], check=True, cwd=ROOT)
            r, raw["call"] = row_call(testbin, a.rounds_call)
            rows += r
        ins, d = inputs(tmp)
        if "drr" in only:
            r, raw["drr_loop"] = row_drr_loop(tb, d, a.rounds)
            rows += r
        if "rt" in only:
            r, raw["round_trip"] = row_round_trip(tb, ins, tmp, a.rounds, works)
            rows += r
        if "rss" in only:
            r, raw["rss"] = row_rss(tb, d, tmp, a.rounds, works)
            rows += r
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()
    print("| measure | Python in process, min / median | peer, min / median | ratio or difference, min / median "
          "| target | result |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()
    print(f"Rounds: {a.rounds_call} (per call), {a.rounds} (the others); load average at the end "
          f"{load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}; {os.cpu_count()} CPUs; NumPy {np.__version__}.")
    if missing:
        print(f"Not in this package yet, left out: {', '.join('tapeloop.' + w for w in missing)}.")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
