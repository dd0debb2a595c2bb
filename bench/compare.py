#!/usr/bin/env python3
"""tapeloop against its peers, each at its best, on the same generated inputs.

For each workload: write the inputs once (fixed seeds), then run tapeloop's
CLI and the peer (a script in bench/peers, each its own process) alternately,
tapeloop, peer, tapeloop, peer … (--reps times, at least 3), so that both
see the same machine load; print one table row with the best (minimum) and
median time per unit of work (one sweep, one matrix, one DRR, one
combination) of each, their ratios, each process's peak resident set (from
wait4, the same measure for both) and how closely the results agree.

The peers and what "at its best" means for each:

- NumPy x @ x.T on OpenBLAS (affinity dot). Debian's OpenBLAS 0.3.21 does
  not recognise recent AVX-512 CPUs and falls back to its "Prescott" (SSE3)
  kernels, several times slower. So the CPU's real family is read from
  /proc/cpuinfo (avx512f, avx512bw, avx512vl and avx512dq: SkylakeX; avx2
  and fma: Haswell; else OpenBLAS's own choice), and every peer runs with
  OPENBLAS_CORETYPE set to it and OPENBLAS_NUM_THREADS and OMP_NUM_THREADS
  set to the cores this process may use. An OPENBLAS_CORETYPE already in
  the environment is kept unless it names weaker kernels than the CPU's
  (Haswell on an AVX-512 CPU); the table says which was used and why. Each peer then asks the OpenBLAS it loaded which
  core and how many threads it runs (bench/peers/peerinfo.py); a peer that
  loaded another core than the one set stops the comparison.
- SciPy cdist(cityblock) (affinity l1): one thread, as SciPy runs it.
- FAISS IndexFlatIP / IndexFlatL2 (affinity --topk K, dot and l2): exact
  k-NN, the field's own library, on all cores (faiss.omp_set_num_threads)
  and the detected OpenBLAS core. Compared by recall: per image, the set
  of K neighbours tapeloop found against FAISS's, ties aside (neighbours
  whose exact float64 affinities tie at the K-th place within 1e-5 of the
  largest may differ).
- plastimatch drr (DRR, exact path against tapeloop's siddon, uniform
  samples against its trilinear): the field's own renderer, on the same
  MetaImage volume (identity direction, a zero outer layer of voxels) and
  the same orbit, mapped to plastimatch's options (drr_plastimatch.py).
  plastimatch renders on one thread, so the poses are shared among as many
  concurrent plastimatch processes as there are cores. Compared by the
  correlation of each pose's image and the largest difference relative to
  the largest value, after converting plastimatch's cm to mm. The NumPy
  per-pose DRR is kept as a further row, labelled as a reimplementation of
  tapeloop's own sampling, not a field tool.
  ASTRA (python3-astra-toolbox in Debian contrib) is not a peer: its 3-D
  cone_vec projectors exist only in CUDA, and Debian's build has none.
- SciPy fftconvolve (wavelet): FFTs on all cores (scipy.fft.set_workers)
  after one untimed warm-up sweep, so pocketfft's plans are made and cached
  before the timed sweep.
- NumPy, chunked (interp): one thread; nothing to tune.

Every row names the peer's configuration as the peer itself reported it
(library, version, OpenBLAS core, threads); a line under the table names
the machine (CPU model, cores, features), the date and the repetitions.
tapeloop's time is its report's total_seconds of a run without output (the
work alone, as the peers time theirs); one more run writes its result.

The whole-process rows (affinity dot, float32, N = 8,000 and 10,000 of
D = 4,096) time what a user waits for instead: the wall time of a
process, start to exit, measured the same way for both (from starting it
to wait4), tapeloop's CLI `tapeloop affinity --images X.npy --metric dot
--out A.npy` against a fresh Python process that runs `x = np.load(X)`,
`np.save(A, x @ x.T)` with NumPy at its best core, interleaved, each
writing over its own previous output (one untimed run of each first, so
every timed run replaces a file, as a rerun does; neither syncs the
file to the disk: tapeloop syncs only a matrix that took 10 s or more to
make). Under the table
a note gives tapeloop's phases (--verbose) of its median run. Every row
gives the 1-minute load average sampled before each of its runs: the
machine's load during it.

Three comparisons set tapeloop against itself, each as two rows, whole
process (wall, start to exit) and work alone (the run's --report), the
paths alternating and each writing its own output over its earlier one;
the peer's columns hold the reference path, so the ratio is its time
over the faster path's:

- process-u8: exact dot products of uint8 images, N = 6,000 of D = 4,096,
  with --dtype int32 and with --dtype float64, against the float32 path
  on the same images stored as float32. The exact outputs are checked
  value for value against NumPy's float64 x @ x.T (exact: every sum is an
  integer under 2⁵³).
- wavelet-columns-wrap, wavelet-columns-reflect: a 200³ random volume
  (an .npy file), 24 combinations, one per batch, with --columns
  energy,std against every statistic, per combination (CSV row). With
  wrap, energy and std come from the spectrum (Parseval's theorem) with
  no inverse transform; with reflect they need the response cropped from
  a larger transform, so only the maximum's comparisons are saved.
- wavelet-columns-wrap-sweep: the same with wrap over 240 combinations
  (10 θ, 6 φ, 4 ξ), where what a process does once weighs less, as in a
  sweep of the size users run.

Usage: compare.py TAPELOOP [--quick] [--reps N] [--only ROW,…] [--markdown FILE]
[--baseline OTHER_TAPELOOP] [--busy N].
`make compare` runs it (after `make compare-deps` installs the peers);
--quick uses small sizes (a smoke test); --only runs some rows (interp,
affinity-dot, affinity-dot-8000, process-dot-8000, process-dot-10000,
process-u8, affinity-l1, topk-dot, topk-l2, drr-siddon, drr-trilinear,
drr-numpy, wavelet, wavelet-columns-wrap, wavelet-columns-reflect,
wavelet-columns-wrap-sweep). A
row whose peer is not installed is skipped with a
note. --baseline runs another build of tapeloop (an earlier commit's, say)
on every row too, interleaved with this one and the peer, and adds a
column: its times and its time over this build's (above 1: this build is
faster), so a change is measured against the code before it in the same
conditions. --busy N runs N processes that only spin, a core each, beside
every row: the figures under load (another job on the machine), with the
load column showing it. --plot DIR also draws each row's times,
tapeloop's against its peer's run by run, into DIR (tapeloop plot).
"""
import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "--helper":
    import numpy as np  # only the helpers load NumPy: the driver stays small

PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers")
sys.path.insert(0, PEERS)
import peerinfo  # noqa: E402  (no NumPy: the driver stays small)


class Skip(Exception):
    """A row whose peer is not installed here."""


def peak(cmd, env=None):
    """Runs cmd, returning (stdout, peak RSS in bytes of that process)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            sys.exit(f"compare: {shlex.join(cmd)} failed with status {os.waitstatus_to_exitcode(status)}\n{tail}")
    return out.decode(), ru.ru_maxrss * 1024


# The driver itself stays small: a child's peak RSS as wait4 reports it
# starts from the parent's (the child begins as a copy of it), so inputs
# are generated and results compared in helper processes.
def helper(name, *args):
    out, _ = peak([sys.executable, os.path.abspath(__file__), "--helper", name, *map(str, args)])
    return json.loads(out) if out.strip() else None


class Context:
    """What every row needs: tapeloop, the scratch directory, the sizes,
    the repetitions, the machine and the environment the peers run in."""

    def __init__(self, tl, d, quick, reps, base=None):
        self.tl, self.d, self.quick, self.reps, self.base = tl, d, quick, reps, base
        self.cpu = peerinfo.cpu()
        self.env = dict(os.environ)
        core, self.core_source = peerinfo.best_core(os.environ)
        if core:
            self.env["OPENBLAS_CORETYPE"] = core
        self.core = self.env.get("OPENBLAS_CORETYPE")
        n = str(self.cpu["cores"])
        self.env.update(OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n)

    def check(self, pj, needs_blas):
        """Stops when the peer did not load what it was set up to load."""
        cfg = pj.get("config") or {}
        blas = cfg.get("blas")
        if needs_blas and not blas:
            sys.exit(f"compare: {pj.get('peer')} loaded no OpenBLAS: cannot check its kernels")
        if blas:
            if self.core and blas["core"].lower() != self.core.lower():
                sys.exit(f"compare: {pj.get('peer')} runs OpenBLAS core {blas['core']}, "
                         f"not the {self.core} set by OPENBLAS_CORETYPE")
            if blas["threads"] != self.cpu["cores"]:
                sys.exit(f"compare: {pj.get('peer')} runs OpenBLAS on {blas['threads']} threads, "
                         f"not {self.cpu['cores']}")
        return cfg.get("text", pj.get("peer", "?"))


def wall(cmd, env=None):
    """Runs cmd, returning (its wall seconds from start to exit, its peak
    RSS in bytes, its stderr)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        seconds = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode(errors="replace")
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"compare: {shlex.join(cmd)} failed with status {os.waitstatus_to_exitcode(status)}\n{text[-2000:]}")
    return seconds, ru.ru_maxrss * 1024, text


def load():
    """The 1-minute load average now."""
    return os.getloadavg()[0]


def tl_seconds(ctx, args, tl=None):
    """tapeloop's seconds for a run without output (the work alone, as the
    peers time it); tl: another build's binary (--baseline)."""
    peak([tl or ctx.tl, *args, "--report", f"{ctx.d}/r.json", "-q"])
    with open(f"{ctx.d}/r.json") as f:
        return json.load(f)["total_seconds"]


def interleaved(ctx, tl_args, tl_out, tl_units, peer_cmd, peer_out, peer_seconds, needs_blas=False):
    """tapeloop and the peer alternately, ctx.reps times each: their
    seconds per unit of work (tapeloop's total over tl_units; the peer's
    from its JSON by peer_seconds), the peer's peak RSS and JSON from its
    first run (the one given peer_out, the arguments that write its
    result), and tapeloop's peak RSS from one more run with tl_out."""
    tl, peer, pj, prss, loads, base = [], [], None, 0, [], []
    for i in range(ctx.reps):
        loads.append(load())
        if ctx.base and i % 2:  # the two builds take turns going first after the peer
            base.append(tl_seconds(ctx, tl_args, ctx.base) / tl_units)
        tl.append(tl_seconds(ctx, tl_args) / tl_units)
        if ctx.base and not i % 2:
            base.append(tl_seconds(ctx, tl_args, ctx.base) / tl_units)
        loads.append(load())
        out, rss = peak(peer_cmd + (peer_out if i == 0 else []), env=ctx.env)
        j = json.loads(out.strip().splitlines()[-1])
        if i == 0:
            pj, prss = j, rss
        peer.append(peer_seconds(j))
    _, rss = peak([ctx.tl, *tl_args, *tl_out, "-q"])
    return dict(tl_s=tl, peer_s=peer, tl_rss=rss, peer_rss=prss, loads=loads,
                config=ctx.check(pj, needs_blas), peer_json=pj, base_s=base)


def numeric(t, p, tol=1e-4):
    """Agreement of two .npy or statistics-CSV results: the largest
    difference relative to the largest value."""
    diff = helper("diff", t, p)
    return dict(agreement=f"max rel. diff {diff:.1e}", ok=diff <= tol)


def py(script):
    return [sys.executable, f"{PEERS}/{script}"]


def interp(ctx):
    d = ctx.d
    m, g, n = (300, 4096, 1_000_000) if not ctx.quick else (30, 512, 20_000)
    helper("gen-interp", d, m, g, n)
    args = ["interp", "-f", f"{d}/f.npy", "-x", f"{d}/x.npy"]
    r = interleaved(ctx, args, ["--out", f"{d}/t.npy"], 1,
                    py("interp_numpy.py") + ["--f", f"{d}/f.npy", "--x", f"{d}/x.npy", "--repeat", "1"],
                    ["--out", f"{d}/p.npy"], lambda j: j["seconds"])
    return dict(r, workload="interp (sumsq)", size=f"M={m} G={g} N={n:,}", peer="NumPy, chunked",
                unit="s/sweep", **numeric(f"{d}/t.npy", f"{d}/p.npy"))


def affinity(ctx, metric, n=None):
    d = ctx.d
    if metric == "dot":
        n, h, w = (n or 10_000, 64, 64) if not ctx.quick else (300, 16, 16)
        dtype, peer = "float32", "NumPy x @ x.T"
    else:
        n, h, w = (2000, 64, 64) if not ctx.quick else (200, 8, 8)
        dtype, peer = "uint8", "SciPy cdist"
    helper("gen-images", d, "img.npy", n, h, w, dtype)
    args = ["affinity", "--images", f"{d}/img.npy", "--metric", metric]
    r = interleaved(ctx, args, ["--out", f"{d}/t.npy"], 1,
                    py("affinity_numpy.py") + ["--images", f"{d}/img.npy", "--metric", metric],
                    ["--out", f"{d}/p.npy"], lambda j: j["seconds"], needs_blas=metric == "dot")
    return dict(r, workload=f"affinity ({metric}), work alone", size=f"N={n:,} D={h * w:,} {dtype}", peer=peer,
                unit="s/matrix", **numeric(f"{d}/t.npy", f"{d}/p.npy"))


# The whole-process peer: what a NumPy user runs, nothing more.
NUMPY_PROCESS = "import numpy as np, sys; x = np.load(sys.argv[1]); x = x.reshape(len(x), -1); np.save(sys.argv[2], x @ x.T)"


def process(ctx, n):
    """tapeloop's CLI against a fresh NumPy process, each timed whole (start
    to exit: loading the images, the product, writing the matrix),
    interleaved; see the module's comment."""
    d = ctx.d
    n, h, w = (n, 64, 64) if not ctx.quick else (n // 25, 16, 16)
    img = f"{d}/proc.npy"
    helper("gen-images", d, "proc.npy", n, h, w, "float32")
    tl_cmd = [ctx.tl, "affinity", "--images", img, "--metric", "dot", "--out", f"{d}/tp.npy", "--verbose"]
    np_cmd = [sys.executable, "-c", NUMPY_PROCESS, img, f"{d}/pp.npy"]
    # The configuration the NumPy process loads, asked once, untimed, in
    # a process of the same environment.
    out, _ = peak([sys.executable, "-c", "import sys, json; sys.path.insert(0, sys.argv[1]); import numpy as np, peerinfo; "
                   "print(json.dumps({'peer': 'numpy', 'config': {'blas': peerinfo.openblas(), 'text': "
                   "f'NumPy {np.__version__}, ' + peerinfo.describe_blas(peerinfo.openblas())}}))", PEERS], env=ctx.env)
    config = ctx.check(json.loads(out), True)
    base_cmd = [ctx.base, *tl_cmd[1:-1], "-q"] if ctx.base else None  # no --verbose: an older build may not print phases
    wall(tl_cmd)  # untimed: the earlier outputs each timed run replaces
    wall(np_cmd, env=ctx.env)
    tl, peer, trss, prss, loads, phases, base = [], [], 0, 0, [], [], []
    for i in range(ctx.reps):
        loads.append(load())
        if base_cmd and i % 2:  # the two builds take turns going first after the peer
            base.append(wall(base_cmd)[0])
        s, rss, err = wall(tl_cmd)
        tl.append(s)
        trss = max(trss, rss)
        phases.append((s, next((line.split("phases: ", 1)[1] for line in err.splitlines() if "phases: " in line), "?")))
        if base_cmd and not i % 2:
            base.append(wall(base_cmd)[0])
        loads.append(load())
        s, rss, _ = wall(np_cmd, env=ctx.env)
        peer.append(s)
        prss = max(prss, rss)
    median = sorted(phases)[len(phases) // 2]
    note = f"tapeloop's phases in its median whole-process run at N={n:,} ({median[0]:.3f} s): {median[1]}"
    return dict(tl_s=tl, peer_s=peer, tl_rss=trss, peer_rss=prss, loads=loads, config=config, base_s=base,
                workload="affinity (dot), whole process", size=f"N={n:,} D={h * w:,} float32",
                peer="NumPy np.load, x @ x.T, np.save", unit="s/process", note=note,
                **numeric(f"{d}/tp.npy", f"{d}/pp.npy"))


def topk(ctx, metric):
    if not has_module("faiss"):
        raise Skip("FAISS not installed (Debian python3-faiss; make compare-deps)")
    d = ctx.d
    n, h, w, k = (10_000, 32, 32, 10) if not ctx.quick else (400, 8, 8, 10)
    if not os.path.exists(f"{d}/knn.npy"):
        helper("gen-images", d, "knn.npy", n, h, w, "float32")
    args = ["affinity", "--images", f"{d}/knn.npy", "--metric", metric, "--topk", str(k)]
    r = interleaved(ctx, args, ["--out", f"{d}/t.npz"], 1,
                    py("knn_faiss.py") + ["--images", f"{d}/knn.npy", "--metric", metric, "-k", str(k),
                                          "--threads", str(ctx.cpu["cores"])],
                    ["--out", f"{d}/p.npz"], lambda j: j["seconds"], needs_blas=True)
    a = helper("knn", f"{d}/knn.npy", metric, f"{d}/t.npz", f"{d}/p.npz")
    return dict(r, workload=f"top-{k} ({metric})", size=f"N={n:,} D={h * w:,} float32",
                peer="FAISS " + ("IndexFlatIP" if metric == "dot" else "IndexFlatL2"), unit="s/search",
                agreement=f"recall {a['recall']:.4f} (ties aside {a['recall_ties']:.4f}), values {a['values']:.1e}",
                ok=a["recall_ties"] == 1 and a["values"] <= 1e-4)


def drr_sizes(ctx):
    n, poses, det = (256, 8, "200x200") if not ctx.quick else (32, 4, "40x40")
    if not os.path.exists(f"{ctx.d}/vol.mha"):
        helper("gen-volume", ctx.d, n)
    return n, poses, det


def drr_plastimatch(ctx, method):
    if not shutil.which("plastimatch"):
        raise Skip("plastimatch not installed (Debian plastimatch; make compare-deps)")
    d = ctx.d
    n, poses, det = drr_sizes(ctx)
    geo = ["--orbit", str(poses), "--detector", det, "--pixel", "2", "--sdd", "1020", "--sid", "510"]
    args = ["drr", "--volume", f"{d}/vol.mha", "--method", method, *geo]
    algorithm = "exact" if method == "siddon" else "uniform"
    r = interleaved(ctx, args, ["--out", f"{d}/t"], poses,
                    py("drr_plastimatch.py") + ["--volume", f"{d}/vol.mha", "--algorithm", algorithm, *geo,
                                                "--processes", str(ctx.cpu["cores"])],
                    ["--out", f"{d}/p.npy"], lambda j: j["seconds"])
    a = helper("images", f"{d}/t/drr.npy", f"{d}/p.npy")
    # The exact paths are the same sums; plastimatch's uniform samples are
    # spaced differently from tapeloop's trilinear ones (0.5 mm here).
    tol = 1e-4 if method == "siddon" else 2e-3
    what = "Siddon, exact path" if method == "siddon" else "trilinear, 0.5 mm"
    return dict(r, workload=f"DRR ({what})", size=f"{n}³, {poses} poses {det}", peer=f"plastimatch drr -i {algorithm}",
                unit="s/DRR", rate="DRRs/s",
                agreement=f"corr ≥ {a['corr']:.6f}, max rel. diff {a['rel']:.1e}",
                ok=a["corr"] >= 0.999 and a["rel"] <= tol)


def drr_numpy(ctx):
    d = ctx.d
    n, poses, det = drr_sizes(ctx)
    geo = ["--spacing", "1,1,1", f"--origin={-n / 2},{-n / 2},{-n / 2}", "--orbit", str(poses),
           "--detector", det, "--pixel", "2"]
    args = ["drr", "--volume", f"{d}/vol.npy", "--method", "trilinear", *geo]
    r = interleaved(ctx, args, ["--out", f"{d}/t"], poses,
                    py("drr_numpy.py") + ["--volume", f"{d}/vol.npy", *geo],
                    ["--out", f"{d}/p.npy"], lambda j: j["seconds"])
    return dict(r, workload="DRR (trilinear, 0.5 mm)", size=f"{n}³, {poses} poses {det}",
                peer="NumPy per pose (reimplementation, not a field tool)", unit="s/DRR", rate="DRRs/s",
                **numeric(f"{d}/t/drr.npy", f"{d}/p.npy"))


def wavelet(ctx):
    d = ctx.d
    n, th, ph, xi = (128, "0:pi:4", "0:pi:2", "1,2") if not ctx.quick else (16, "0:pi:2", "0.5", "1,2")
    helper("gen-noise", d, n)
    grid = ["--theta", th, "--phi", ph, "--xi", xi, "--boundary", "reflect"]
    combos = helper("count", th, ph, xi)
    r = interleaved(ctx, ["wavelet", "--volume", f"{d}/wvol.npy", *grid], ["--out", f"{d}/t.csv"], combos,
                    py("wavelet_scipy.py") + ["--volume", f"{d}/wvol.npy", *grid, "--warmup", "1",
                                              "--workers", str(ctx.cpu["cores"])],
                    ["--out", f"{d}/p.csv"], lambda j: sum(j["times"]) / len(j["times"]))
    return dict(r, workload="wavelet (reflect)", size=f"{n}³, {combos} combinations",
                peer="SciPy fftconvolve", unit="s/combination", **numeric(f"{d}/t.csv", f"{d}/p.csv"))


def paths(ctx, runs, per=1):
    """tapeloop against itself: the commands in runs (name → arguments; the
    first is the reference path) alternately, ctx.reps times each, every run
    a whole process timed start to exit (wall), with --report for the work
    alone (its total seconds). Each command writes its own output,
    replacing its earlier one after one untimed run of each. Returns per name the wall and work
    seconds per unit (over per units), the peak RSS and the loads."""
    res = {k: dict(wall=[], work=[], rss=0) for k in runs}
    loads = []
    for args in runs.values():
        wall([ctx.tl, *args, "-q"])
    for i in range(ctx.reps):
        order = list(runs) if i % 2 == 0 else list(runs)[::-1]  # who goes first alternates
        for k in order:
            loads.append(load())
            s, rss, _ = wall([ctx.tl, *runs[k], "--report", f"{ctx.d}/r.json", "-q"])
            with open(f"{ctx.d}/r.json") as f:
                rep = json.load(f)
            work = rep["total_seconds"] / per
            res[k]["wall"].append(s / per)
            res[k]["work"].append(work)
            res[k]["rss"] = max(res[k]["rss"], rss)
    return res, loads


def own_rows(res, loads, ref, fast, base, config, agreement, ok, unit, work_unit):
    """Two table rows, whole process and work alone, of path fast against
    the reference path ref (in the peer's columns): the ratio is the
    reference's time over fast's."""
    row = dict(base, config=config, peer_rss=res[ref]["rss"], tl_rss=res[fast]["rss"], loads=loads,
               agreement=agreement, ok=ok)
    whole = dict(row, workload=base["workload"] + ", whole process", peer_s=res[ref]["wall"],
                 tl_s=res[fast]["wall"], unit=unit)
    alone = dict(row, workload=base["workload"] + ", work alone", peer_s=res[ref]["work"],
                 tl_s=res[fast]["work"], unit=work_unit)
    return [whole, alone]


def process_u8(ctx):
    """Exact dot products of uint8 images (--dtype int32, and float64)
    against the float32 path on the same images stored as float32, each a
    whole `tapeloop affinity` process; see the module's comment."""
    d = ctx.d
    n, h, w = (6000, 64, 64) if not ctx.quick else (300, 16, 16)
    helper("gen-images-u8", d, n, h, w)
    common = ["affinity", "--metric", "dot"]
    runs = {"float32": [*common, "--images", f"{d}/u8f.npy", "--out", f"{d}/a-f32.npy"],
            "int32": [*common, "--images", f"{d}/u8.npy", "--dtype", "int32", "--out", f"{d}/a-i32.npy"],
            "float64": [*common, "--images", f"{d}/u8.npy", "--dtype", "float64", "--out", f"{d}/a-f64.npy"]}
    res, loads = paths(ctx, runs)
    exact = helper("u8-exact", f"{d}/u8.npy", f"{d}/a-i32.npy", f"{d}/a-f64.npy", f"{d}/a-f32.npy")
    agree = (f"int32 and float64: {exact['differ']:,} of 2 × {n * n:,} values differ from NumPy's "
             f"float64 x @ x.T; float32 path max rel. diff {exact['f32']:.1e}")
    size = f"N={n:,} D={h * w:,} uint8"
    rows = []
    for fast in ("int32", "float64"):
        base = dict(workload=f"affinity (dot) uint8, --dtype {fast} (exact)", size=size,
                    peer="tapeloop, the same images as float32 (float32 output)", base_s=[])
        rows += own_rows(res, loads, "float32", fast, base, "tapeloop --dtype float32", agree,
                         exact["differ"] == 0, "s/process", "s/matrix")
    return rows


def wavelet_columns(ctx, boundary, sweep=False):
    """--columns energy,std against every statistic, a whole `tapeloop
    wavelet` process each, one combination per batch; both per CSV row.
    sweep: 240 combinations instead of 24, so that what a process spends
    once (start, reading and checking the volume, its transform) weighs
    as it does in a sweep."""
    d = ctx.d
    n, th, ph, xi = (200, "0.2:pi:4", "0.3,1.1", "1,2,4") if not ctx.quick else (24, "0.2:pi:2", "0.3", "1,2")
    if sweep:
        th, ph, xi = ("0.2:pi:10", "0.3:1.5:6", "1,2,3,4") if not ctx.quick else ("0.2:pi:4", "0.3,1.1", "1,2")
    combos = helper("count", th, ph, xi)
    vol = f"{d}/wvol{n}.npy"
    if not os.path.exists(vol):
        helper("gen-noise", d, n, os.path.basename(vol))
    grid = ["wavelet", "--volume", vol, "--theta", th, "--phi", ph, "--xi", xi,
            "--boundary", boundary, "--batch", "1"]
    runs = {"all": [*grid, "--out", f"{d}/wa.csv"],
            "energy,std": [*grid, "--columns", "energy,std", "--out", f"{d}/we.csv"]}
    res, loads = paths(ctx, runs, per=combos)
    diff = helper("columns", f"{d}/wa.csv", f"{d}/we.csv")
    base = dict(workload=f"wavelet ({boundary}), --columns energy,std", size=f"{n}³ .npy, {combos} combinations",
                peer="tapeloop, every statistic", base_s=[])
    return own_rows(res, loads, "all", "energy,std", base, "tapeloop, default --columns",
                    f"energy, std max rel. diff {diff:.1e}", diff <= 1e-6, "s/combination", "s/combination")


ROWS = [
    ("interp", interp),
    ("affinity-dot", lambda c: affinity(c, "dot")),
    ("affinity-dot-8000", lambda c: affinity(c, "dot", 8000)),
    ("process-dot-8000", lambda c: process(c, 8000)),
    ("process-dot-10000", lambda c: process(c, 10_000)),
    ("process-u8", process_u8),
    ("affinity-l1", lambda c: affinity(c, "l1")),
    ("topk-dot", lambda c: topk(c, "dot")),
    ("topk-l2", lambda c: topk(c, "l2")),
    ("drr-siddon", lambda c: drr_plastimatch(c, "siddon")),
    ("drr-trilinear", lambda c: drr_plastimatch(c, "trilinear")),
    ("drr-numpy", drr_numpy),
    ("wavelet", wavelet),
    ("wavelet-columns-wrap", lambda c: wavelet_columns(c, "wrap")),
    ("wavelet-columns-reflect", lambda c: wavelet_columns(c, "reflect")),
    ("wavelet-columns-wrap-sweep", lambda c: wavelet_columns(c, "wrap", sweep=True)),
]


def has_module(name):
    return subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True).returncode == 0


def mib(b):
    return f"{b / 2**20:.0f} MiB"


def cells(r):
    """The table's cells of one row: times as best / median (rates for
    DRRs: best is the highest), ratios peer ÷ tapeloop of the best and of
    the median times (above 1: tapeloop is faster)."""
    def show(ts):
        best, med = min(ts), statistics.median(ts)
        if r.get("rate"):
            return f"{1 / best:.4g} / {1 / med:.4g} {r['rate']}"
        return f"{best:.4g} / {med:.4g} {r['unit']}"
    ratio_best = min(r["peer_s"]) / min(r["tl_s"])
    ratio_med = statistics.median(r["peer_s"]) / statistics.median(r["tl_s"])
    row = [r["workload"], r["size"], r["peer"], r["config"], show(r["peer_s"]), show(r["tl_s"]),
           f"{ratio_best:.2f}× / {ratio_med:.2f}×", mib(r["peer_rss"]), mib(r["tl_rss"]), r["agreement"],
           f"{min(r['loads']):.1f}–{max(r['loads']):.1f}"]
    if r.get("base_s"):
        b = r["base_s"]
        row.append(f"{show(b)}; {min(b) / min(r['tl_s']):.2f}× / {statistics.median(b) / statistics.median(r['tl_s']):.2f}×")
    return row


RATIO = ("Ratio: the peer's time over tapeloop's, of the best runs and of the medians "
         "(above 1: tapeloop is faster).")
HEAD = ["workload", "size", "peer", "peer configuration (as loaded)", "peer best / median",
        "tapeloop best / median", "ratio best / median", "peer peak RSS", "tapeloop peak RSS", "agreement",
        "load (1 min)"]


def machine_line(ctx, took):
    c = ctx.cpu
    f = c["flags"]
    feats = ("AVX-512" if "avx512f" in f else "AVX2+FMA" if {"avx2", "fma"} <= f
             else "NEON" if "asimd" in f else "no AVX2")
    core = (f"OPENBLAS_CORETYPE={ctx.core} (from {ctx.core_source})" if ctx.core
            else "OPENBLAS_CORETYPE unset (OpenBLAS's own choice: no AVX2/AVX-512 family to name)")
    return (f"Machine: {c['model']}, {c['cores']} cores ({feats}), {platform.system()} {platform.machine()}; "
            f"peers with {core}, OPENBLAS_NUM_THREADS={c['cores']}, OMP_NUM_THREADS={c['cores']}. "
            f"Date: {time.strftime('%Y-%m-%d')}. {ctx.reps} interleaved repetitions per row; took {took:.0f} s.")


@contextlib.contextmanager
def busy(n):
    """n processes that spin on a core each while the block runs: the
    load of another job sharing the machine."""
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in spin:
            p.kill()
            p.wait()


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--helper":
        return run_helper(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tapeloop")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved runs of each side per row (at least 3)")
    ap.add_argument("--only", help="comma-separated rows: " + ", ".join(k for k, _ in ROWS))
    ap.add_argument("--markdown", help="also write the table to this Markdown file")
    ap.add_argument("--baseline", help="another build of tapeloop, run interleaved with this one on every "
                    "row: its times and its time over this build's, best / median (above 1: this build is faster)")
    ap.add_argument("--plot", metavar="DIR",
                    help="also draw each row's times, tapeloop's against its peer's run by run, "
                    "as DIR/ROW.png (with tapeloop plot)")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="run N processes that only spin beside the rows, for the figures under load "
                    "(each adds about 1 to the load average)")
    args = ap.parse_args()
    if args.reps < 3:
        ap.error("--reps: at least 3 (a best and a median need several runs)")
    if args.busy < 0:
        ap.error("--busy: a count of processes, 0 or more")
    only = set(args.only.split(",")) if args.only else {k for k, _ in ROWS}
    if only - {k for k, _ in ROWS}:
        ap.error(f"--only: unknown rows {', '.join(sorted(only - {k for k, _ in ROWS}))}")
    rows, notes = [], []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tapeloop-compare-") as d, busy(args.busy):
        ctx = Context(os.path.abspath(args.tapeloop), d, args.quick, args.reps,
                      os.path.abspath(args.baseline) if args.baseline else None)
        for key, job in ROWS:
            if key not in only:
                continue
            try:
                got = job(ctx)
            except Skip as e:
                notes.append(f"{key} skipped: {e}")
                print(f"  {notes[-1]}", file=sys.stderr)
                continue
            for r in got if isinstance(got, list) else [got]:
                rows.append(r)
                c = cells(r)
                print(f"  {r['workload']} {r['size']}: peer {c[4]}, tapeloop {c[5]}, ratio {c[6]}; {c[9]}; load {c[10]}"
                      + (f"; baseline {c[11]}" if len(c) > 11 else ""), file=sys.stderr)
                if r.get("note"):
                    notes.append(r["note"])
                    print(f"  {r['note']}", file=sys.stderr)
        took = time.perf_counter() - t0
        machine = machine_line(ctx, took)
        if args.busy:
            machine += f" {args.busy} spinning process{'es' if args.busy > 1 else ''} (--busy) ran beside every row."
    lines = [cells(r) for r in rows]
    head = HEAD + (["baseline best / median; baseline ÷ tapeloop"] if args.baseline else [])
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)] if lines else []
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)))
    print(RATIO)
    print(machine)
    for note in notes:
        print(f"Note: {note}.")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(machine + "\n\n")
            f.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
            for line in lines:
                f.write("| " + " | ".join(line) + " |\n")
            f.write(f"\n{RATIO}\n")
            for note in notes:
                f.write(f"\nNote: {note}.\n")
    if args.plot:
        for path in plot_rows(os.path.abspath(args.tapeloop), rows, args.plot):
            print(f"  drew {path}", file=sys.stderr)
    bad = [r["workload"] for r in rows if not r["ok"]]
    if bad:
        sys.exit(f"compare: results disagree beyond their tolerance for {', '.join(bad)}")


def slug(text):
    """text as a file name: lowercase words joined by hyphens."""
    words = "".join(c if c.isascii() and c.isalnum() else " " for c in text.lower()).split()
    return "-".join(words) or "row"


def plot_rows(tl, rows, out_dir):
    """Draws each row's times, run by run (tapeloop, its peer and, with
    --baseline, the baseline build), with tapeloop plot: writes
    out_dir/ROW.csv (series,run,seconds) and out_dir/ROW.png, and
    returns the figures' paths."""
    import csv
    os.makedirs(out_dir, exist_ok=True)
    drawn, seen = [], set()
    for r in rows:
        name = slug(f"{r['workload']} {r['size']}")
        while name in seen:
            name += "-again"
        seen.add(name)
        table = os.path.join(out_dir, name + ".csv")
        with open(table, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["series", "run", "seconds"])
            for series, times in (("tapeloop", r["tl_s"]), ("tapeloop baseline", r.get("base_s") or []),
                                  (r["peer"], r["peer_s"])):
                for i, t in enumerate(times):
                    w.writerow([series, i + 1, repr(t)])
        unit = r.get("unit", "s").replace("s/", "ms per ", 1) if r.get("unit", "").startswith("s/") else "ms"
        fig = os.path.join(out_dir, name + ".png")
        title = f"{r['workload']}, {r['size']}: {unit}"
        p = subprocess.run([tl, "plot", table, "--out", fig, "--title", title], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"compare: --plot: {p.stderr.strip()}")
        drawn.append(fig)
    return drawn


# Helpers: each runs in its own process (see helper above).

def rel_diff(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        sys.exit(f"compare: result shapes differ: {got.shape} vs {want.shape}")
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-300))


def diff_files(t, p):
    """Largest difference of two .npy or statistics-CSV results."""
    if t.endswith(".csv"):
        load = lambda f: np.loadtxt(f, delimiter=",", skiprows=1)[:, 3:]  # noqa: E731
        a, b = load(t), load(p)
        return max(rel_diff(a[:, i], b[:, i]) for i in range(a.shape[1]))
    return rel_diff(np.load(t), np.load(p))


def u8_exact(images, i32, f64, f32):
    """How many of the exact outputs' values differ from NumPy's float64
    product of the uint8 images (exact: every sum is an integer under
    2⁵³), and the float32 path's largest relative difference from it."""
    x = np.load(images)
    x = x.reshape(len(x), -1).astype(np.float64)
    want = x @ x.T
    a, b = np.load(i32), np.load(f64)
    if a.dtype != np.int32 or b.dtype != np.float64:
        sys.exit(f"compare: exact outputs are {a.dtype} and {b.dtype}, not int32 and float64")
    differ = int(np.count_nonzero(a != want)) + int(np.count_nonzero(b != want))
    return {"differ": differ, "f32": rel_diff(np.load(f32), want)}


def columns_diff(every, some):
    """Largest relative difference of the energy and std columns of two
    wavelet CSVs of the same combinations, one with every statistic."""
    a = np.genfromtxt(every, delimiter=",", names=True)
    b = np.genfromtxt(some, delimiter=",", names=True)
    if b.dtype.names != ("theta", "phi", "xi", "energy", "std"):
        sys.exit(f"compare: --columns energy,std wrote {b.dtype.names}")
    return max(rel_diff(b[c], a[c]) for c in ("energy", "std"))


def smooth_volume(n, seed):
    """A sum of random Gaussian blobs: a smooth (X, Y, Z) volume, its outer
    layer of voxels zero (plastimatch puts the volume's box faces at the
    outer voxels' centres, tapeloop at their outer faces: with nothing
    there, both integrate the same)."""
    rng = np.random.default_rng(seed)
    ax = np.arange(n, dtype=np.float32)
    v = np.zeros((n, n, n), np.float32)
    for _ in range(12):
        c, r = rng.uniform(0.2 * n, 0.8 * n, 3), rng.uniform(0.05 * n, 0.2 * n)
        gx, gy, gz = (np.exp(-((ax - c[i]) / r) ** 2 / 2) for i in range(3))
        v += rng.uniform(0.005, 0.02) * gx[:, None, None] * gy[None, :, None] * gz[None, None, :]
    v[[0, -1]] = 0
    v[:, [0, -1]] = 0
    v[:, :, [0, -1]] = 0
    return v


def write_mha(path, v, origin, spacing):
    """v ((X, Y, Z) float32) as MetaImage: identity direction, Offset the
    centre of voxel 0, x varying fastest in the file."""
    head = ("ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
            "CompressedData = False\nTransformMatrix = 1 0 0 0 1 0 0 0 1\n"
            f"Offset = {' '.join(map(repr, origin))}\nElementSpacing = {' '.join(map(repr, spacing))}\n"
            f"DimSize = {' '.join(map(str, v.shape))}\nElementType = MET_FLOAT\nElementDataFile = LOCAL\n")
    with open(path, "wb") as f:
        f.write(head.encode())
        f.write(np.ascontiguousarray(v.T, dtype="<f4").tobytes())


def knn_agreement(images, metric, t, p):
    """Recall of tapeloop's top-k sets against the peer's: raw, and with
    ties aside (an index the peer found and tapeloop did not counts as
    found when its exact float64 affinity is the K-th place's, within 1e-5
    of the row's largest affinity);
    and the largest difference of the sorted values, relative to the
    largest value."""
    x = np.load(images)
    x = x.reshape(len(x), -1).astype(np.float64)
    zt, zp = np.load(t), np.load(p)
    ti, pi = zt["indices"], zp["indices"]
    n, k = ti.shape
    found = found_ties = 0
    for i in range(n):
        a, b = set(ti[i].tolist()), set(pi[i].tolist())
        common = len(a & b)
        found += common
        if common == k:
            found_ties += k
            continue
        idx = np.array(sorted(a | b))
        if metric == "dot":
            exact = x[idx] @ x[i]
        else:
            exact = -((x[idx] - x[i]) ** 2).sum(axis=1)
        val = dict(zip(idx.tolist(), exact))
        kth = np.sort(exact)[::-1][k - 1]  # the K-th place among both sets' neighbours
        scale = max(abs(e) for e in exact) or 1
        found_ties += common + sum(1 for j in b - a if abs(val[j] - kth) <= 1e-5 * scale)
    values = rel_diff(np.sort(zt["values"], axis=1), np.sort(zp["values"], axis=1))
    return {"recall": found / (n * k), "recall_ties": found_ties / (n * k), "values": values}


def image_agreement(t, p):
    """The lowest per-image correlation, and the largest difference relative
    to the largest value, of two (P, R, C) image stacks."""
    a, b = np.load(t).astype(np.float64), np.load(p).astype(np.float64)
    if a.shape != b.shape:
        sys.exit(f"compare: image stacks differ in shape: {a.shape} vs {b.shape}")
    corr = min(float(np.corrcoef(a[k].ravel(), b[k].ravel())[0, 1]) for k in range(len(a)))
    return {"corr": corr, "rel": rel_diff(a, b)}


def run_helper(name, args):
    d = args[0]
    if name == "gen-interp":
        m, g, n = map(int, args[1:])
        rng = np.random.default_rng(11)
        np.save(f"{d}/f.npy", np.cumsum(rng.standard_normal((m, g)), axis=1).astype(np.float32))
        np.save(f"{d}/x.npy", rng.uniform(-0.05, 1.05, n).astype(np.float32))
    elif name == "gen-images":
        n, h, w = map(int, args[2:5])
        rng = np.random.default_rng(12)
        if args[5] == "uint8":
            x = rng.integers(0, 256, (n, h, w), dtype=np.uint8)
        else:
            x = rng.standard_normal((n, h, w), dtype=np.float32)
        np.save(f"{d}/{args[1]}", x)
    elif name == "gen-images-u8":
        n, h, w = map(int, args[1:4])
        x = np.random.default_rng(13).integers(0, 256, (n, h, w), dtype=np.uint8)
        np.save(f"{d}/u8.npy", x)
        np.save(f"{d}/u8f.npy", x.astype(np.float32))
    elif name == "u8-exact":
        print(json.dumps(u8_exact(*args)))
    elif name == "columns":
        print(json.dumps(columns_diff(*args)))
    elif name == "gen-volume":
        n = int(args[1])
        v = smooth_volume(n, 14)
        np.save(f"{d}/vol.npy", v)
        write_mha(f"{d}/vol.mha", v, [-n / 2] * 3, [1.0] * 3)
    elif name == "gen-noise":
        n = int(args[1])
        name = args[2] if len(args) > 2 else "wvol.npy"
        np.save(f"{d}/{name}", np.random.default_rng(15).standard_normal((n, n, n)).astype(np.float32))
    elif name == "count":
        sys.path.insert(0, PEERS)
        from wavelet_scipy import parse_list
        print(json.dumps(len(parse_list(args[0])) * len(parse_list(args[1])) * len(parse_list(args[2]))))
    elif name == "diff":
        print(json.dumps(diff_files(args[0], args[1])))
    elif name == "knn":
        print(json.dumps(knn_agreement(*args)))
    elif name == "images":
        print(json.dumps(image_agreement(args[0], args[1])))


if __name__ == "__main__":
    main()
