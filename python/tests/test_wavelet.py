"""tapeloop.Wavelet against the CLI, a NumPy reference, and itself over 1,000 calls."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tapeloop
from helpers import CLI

HAS_CLI = os.access(CLI, os.X_OK)

# Three sweeps of one object: the second needs wider kernels than the first
# (in reflect mode a larger padding: the object recompiles), the third is
# the first again, now on the larger padding.
SWEEPS = [
    ([0.0, np.pi / 4], [0.0], [1.0, 2.0]),
    ([np.pi / 3, 1.0], [np.pi / 6, 0.0], [0.5, 3.25]),
    ([0.0, np.pi / 4], [0.0], [1.0, 2.0]),
]


def cli_csv(tmp_path, volume_file, sweep, a, boundary, stats=None):
    """The CLI's CSV for the sweep as {column: float64 array}. The CLI prints
    each float64 in the shortest form that reads back the same
    (strconv.FormatFloat(v, 'g', -1, 64)), so float() recovers its exact
    values."""
    theta, phi, xi = (",".join(repr(float(v)) for v in vals) for vals in sweep)
    out = tmp_path / "stats.csv"
    cmd = [CLI, "wavelet", "--volume", str(volume_file), f"--theta={theta}", f"--phi={phi}", f"--xi={xi}",
           "-a", repr(float(a)), "--boundary", boundary, "--out", str(out), "--quiet"]
    for name, formula in (stats or {}).items():
        cmd += ["--stat", f"{name}={formula}"]
    subprocess.run(cmd, check=True, capture_output=True)
    header, *rows = out.read_text().splitlines()
    values = np.array([[float(f) for f in r.split(",")] for r in rows])
    return {name: values[:, i] for i, name in enumerate(header.split(","))}


@pytest.mark.skipif(not HAS_CLI, reason="bin/tapeloop not built")
@pytest.mark.parametrize("boundary", ["reflect", "wrap"])
def test_same_as_cli(tmp_path, boundary):
    rng = np.random.default_rng()
    v = rng.standard_normal((13, 11, 9))  # float64: the CLI and the object both round it to float32
    np.save(tmp_path / "v.npy", v)
    a, stats = 0.9, {"l1": "sum(abs(g))", "e2": "sum(g^2)"}
    with tapeloop.Wavelet(v, a=a, boundary=boundary, stats=stats, batch=3) as w:
        assert w.columns == ("theta", "phi", "xi", "energy", "std", "max", "wavelet_energy", "l1", "e2")
        first = None
        for k, sweep in enumerate(SWEEPS):
            want = cli_csv(tmp_path, tmp_path / "v.npy", sweep, a, boundary, stats)
            got = w(*sweep)
            assert list(got) == list(want), f"sweep {k}: columns"
            for name in want:
                assert got[name].dtype == np.float64
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"sweep {k}, {name}")
            if first is None:
                first = got
        for name in first:  # the first sweep again, after the recompile: the same numbers
            np.testing.assert_array_equal(got[name], first[name])
        assert w.report()["calls"] == len(SWEEPS)
    one = tapeloop.wavelet(v.astype(np.float32), *SWEEPS[1], a=a, boundary=boundary, stats=stats)
    want = cli_csv(tmp_path, tmp_path / "v.npy", SWEEPS[1], a, boundary, stats)
    for name in want:
        np.testing.assert_array_equal(one[name], want[name])


def hat_rotation(theta, phi):
    """The rows of ops/wavelet_kernel.go's hatRotation: an offset (x, y, z)
    to the kernel's frame (u = rT along the stretched axis, v = rp, w = rp2)."""
    ct, st, cp, sp = np.cos(theta), np.sin(theta), np.cos(phi), np.sin(phi)
    return np.array([[cp * ct, -st, sp * ct], [cp * st, ct, sp * st], [-sp, 0.0, cp]])


def periodic_hat(shape, a, theta, phi, xi, periods=2):
    """The hat ψ = (3 − q)·exp(−q/2), q = (v/a)² + (u/(a·ξ))² + (w/a)²,
    sampled at integer offsets and wrapped onto the periodic grid of shape
    (origin at index 0) by summing its images over ±periods periods: the
    kernel the library's closed-form spectrum is the transform of."""
    axes = [np.arange(-periods * n, periods * n + 1) for n in shape]
    x, y, z = np.meshgrid(*axes, indexing="ij")
    r = hat_rotation(theta, phi)
    u, v, w = (r[i, 0] * x + r[i, 1] * y + r[i, 2] * z for i in range(3))
    q = (v / a) ** 2 + (u / (a * xi)) ** 2 + (w / a) ** 2
    psi = (3 - q) * np.exp(-q / 2)
    k = np.zeros(shape)
    np.add.at(k, (x % shape[0], y % shape[1], z % shape[2]), psi)
    return k


def test_numpy_reference_wrap():
    rng = np.random.default_rng()
    shape = (15, 13, 11)
    v = rng.standard_normal(shape).astype(np.float32)
    # a and ξ keep every kernel's support box (q ≤ 36) narrower than the
    # volume, where the library uses the hat's closed-form spectrum.
    a, theta, phi, xi = 0.7, [0.0, 0.6, 2.0], [0.0, 1.1], [0.5, 1.0, 1.15]
    got = tapeloop.wavelet(v, theta, phi, xi, a=a, boundary="wrap")
    spec = np.fft.rfftn(v.astype(np.float64))
    row = 0
    for t in theta:
        for p in phi:
            for x in xi:
                k = periodic_hat(shape, a, t, p, x)
                g = np.fft.irfftn(spec * np.fft.rfftn(k), s=shape)  # circular convolution
                want = {"energy": (g * g).sum(), "std": g.std(), "max": g.max(), "wavelet_energy": (k * k).sum()}
                assert (got["theta"][row], got["phi"][row], got["xi"][row]) == (t, p, x)
                for name, value in want.items():
                    assert abs(got[name][row] - value) <= 1e-5 * abs(value), (t, p, x, name, got[name][row], value)
                row += 1
    assert row == len(got["energy"])


@pytest.mark.parametrize("boundary", ["reflect", "wrap"])
def test_columns(tmp_path, boundary):
    """columns= returns those built-in columns, in the CSV's order, with the
    numbers of the full call bit for bit (and of the CLI's --columns); the
    user's statistics are returned whatever the columns."""
    rng = np.random.default_rng()
    v = rng.standard_normal((11, 9, 13))
    sweep = ([0.0, 0.7], [0.3], [1.0, 2.5])
    stats = {"l1": "sum(abs(g))", "m2": "max(g)*2"}
    full = tapeloop.wavelet(v, *sweep, boundary=boundary, stats=stats)
    for cols, names in [(["energy", "std"], ["energy", "std", "l1", "m2"]),
                        ("std,energy", ["energy", "std", "l1", "m2"]),
                        (["max"], ["max", "l1", "m2"]),
                        (["wavelet_energy", "l1", "theta"], ["wavelet_energy", "l1", "m2"])]:
        got = tapeloop.wavelet(v, *sweep, boundary=boundary, stats=stats, columns=cols)
        assert list(got) == ["theta", "phi", "xi", *names], cols
        for name, col in got.items():
            np.testing.assert_array_equal(col, full[name], err_msg=f"{cols}: {name}")
    if HAS_CLI:
        np.save(tmp_path / "v.npy", v)
        theta, phi, xi = (",".join(repr(float(x)) for x in vals) for vals in sweep)
        out = tmp_path / "s.csv"
        subprocess.run([CLI, "wavelet", "--volume", str(tmp_path / "v.npy"), f"--theta={theta}", f"--phi={phi}", f"--xi={xi}",
                        "--boundary", boundary, "--columns", "std,energy", "--stat", "l1=sum(abs(g))", "--stat", "m2=max(g)*2",
                        "--out", str(out), "--quiet"], check=True, capture_output=True)
        header, *rows = out.read_text().splitlines()
        assert header == "theta,phi,xi,energy,std,l1,m2"
        values = np.array([[float(f) for f in r.split(",")] for r in rows])
        for i, name in enumerate(header.split(",")):
            np.testing.assert_array_equal(values[:, i], full[name], err_msg=name)
    for bad, msg in [(["energy", "Energy"], r'^columns=: unknown column "Energy"; want some of energy, std, max, wavelet_energy'),
                     ([], r"^columns=: empty list"),
                     ("energy,,std", r"^columns=: an empty name"),
                     ("std,std", r"^columns=: std is named twice"),
                     (["energy", 1], r"^columns=: 1 is not a column name"),
                     (5, r"^columns=5: want a list of column names")]:
        with pytest.raises(tapeloop.Error, match=msg):
            tapeloop.Wavelet(v, boundary=boundary, columns=bad)


@pytest.mark.parametrize("name", ["energy", "std", "max", "wavelet_energy", "theta", "phi", "xi"])
def test_stat_named_like_a_column_is_refused(name):
    """A statistic may not take the name of a column the sweep writes itself
    (whether columns= returns it or not), given as a dict or as the CLI's
    name=formula text; nor one name twice."""
    v = np.random.default_rng().standard_normal((7, 5, 9))
    msg = rf'^stats= "{name}=sum\(g\)": {name} is taken by a built-in column; give the statistic another name$'
    for stats in [{name: "sum(g)"}, f"{name}=sum(g)", ["l1=sum(abs(g))", f"{name}=sum(g)"]]:
        for columns in [None, ["std"]]:
            with pytest.raises(tapeloop.Error, match=msg):
                tapeloop.Wavelet(v, stats=stats, columns=columns)
    with pytest.raises(tapeloop.Error, match=msg):
        tapeloop.wavelet(v, 0, 0, 1, stats={name: "sum(g)"})
    with pytest.raises(tapeloop.Error, match=r'^stats= "l1=max\(g\)": l1 is taken by another statistic'):
        tapeloop.Wavelet(v, stats=["l1=sum(abs(g))", "l1=max(g)"])
    got = tapeloop.wavelet(v, 0, 0, 1, stats={name + "2": "sum(g^2)"})
    assert list(got)[-1] == name + "2"
    np.testing.assert_allclose(got[name + "2"], got["energy"], rtol=1e-6)


def test_bad_input_is_the_cli_message(tmp_path):
    v = np.random.default_rng().standard_normal((6, 5, 4))
    with pytest.raises(tapeloop.Error) as e:
        tapeloop.Wavelet(v, stats={"l1": "sum(abs(h))"})
    bad_formula = str(e.value)  # the CLI's message, naming the keyword where the CLI names its flag
    assert bad_formula.startswith('stats= l1 "sum(abs(h))"') and "\n" not in bad_formula
    with pytest.raises(tapeloop.Error) as e:
        tapeloop.Wavelet(v[0])
    flat = str(e.value)
    assert flat.startswith("volume=") and flat.endswith("has shape (5, 4), want a 3-D volume")
    with tapeloop.Wavelet(v) as w:
        # ξ = 0 has no kernel: its row is NaN, the other the row alone.
        got, alone = w(0, 0, [1, 0]), w(0, 0, 1)
        for name, col in got.items():
            if name not in ("theta", "phi", "xi"):
                assert col[0] == alone[name][0] and np.isnan(col[1]), name
        with pytest.raises(tapeloop.Error, match="^phi=: empty list$"):
            w(0, [], 1)
        with pytest.raises(tapeloop.Error, match="at most 16777216"):
            w(np.zeros(300), np.zeros(300), np.ones(300))
        assert len(w(0, 0, 1)["energy"]) == 1  # usable after refused calls
    with tapeloop.Wavelet(v, fail_on_nonfinite=True) as w:
        with pytest.raises(tapeloop.Error) as e:
            w(0, 0, [1, 0])
        xi_zero = str(e.value)
        assert xi_zero == ("fail_on_nonfinite=: 1 combinations have no kernel "
                           "(the first: θ = 0, φ = 0, ξ = 0: wavelet: stretch ξ = 0 must be positive)"), xi_zero
    if HAS_CLI:
        np.save(tmp_path / "v.npy", v)
        np.save(tmp_path / "flat.npy", v[0])
        for args, msg in [(["--volume", str(tmp_path / "v.npy"), "--stat", "l1=sum(abs(h))"],
                           bad_formula.replace("stats= ", "--stat ").replace("params= ", "--param ")),
                          (["--volume", str(tmp_path / "flat.npy")], flat[len("--volume: the array"):]),
                          (["--volume", str(tmp_path / "v.npy"), "--theta", "0", "--phi", "0", "--xi", "1,0", "--fail-on-nonfinite"],
                           xi_zero.replace("fail_on_nonfinite=", "--fail-on-nonfinite"))]:
            cli = subprocess.run([CLI, "wavelet", "--quiet", *args], capture_output=True, text=True)
            assert cli.returncode != 0 and msg in cli.stderr, (args, cli.stderr)


def test_fail_on_nonfinite(tmp_path):
    """fail_on_nonfinite, in the class and the one-shot function, refuses a
    statistic that is NaN as the CLI's --fail-on-nonfinite does; without it
    the NaN is the value, as in the CLI's CSV."""
    v = np.random.default_rng(5).standard_normal((6, 5, 4)).astype(np.float32)
    stats = {"s": "log(min(g) - 1e9)"}  # the log of a negative number: NaN
    kept = tapeloop.wavelet(v, 0, 0, [1, 2], stats=stats)
    assert np.isnan(kept["s"]).all() and np.isfinite(kept["energy"]).all()
    with pytest.raises(tapeloop.Error) as e:
        tapeloop.wavelet(v, 0, 0, [1, 2], stats=stats, fail_on_nonfinite=True)
    refused = str(e.value)
    assert refused == "kernel= or stats= gave 2 non-finite values (NaN or ±Inf) and fail_on_nonfinite= is set", refused
    with tapeloop.Wavelet(v, stats=stats, fail_on_nonfinite=True) as w:
        with pytest.raises(tapeloop.Error, match="fail_on_nonfinite= is set"):
            w(0, 0, [1, 2])
        with pytest.raises(tapeloop.Error, match="fail_on_nonfinite= is set"):
            w(0, 0, 1)  # each call on its own
    # Without formulas it still refuses a combination without a kernel.
    assert np.isfinite(tapeloop.wavelet(v, 0, 0, 1, fail_on_nonfinite=True)["energy"]).all()
    with pytest.raises(tapeloop.Error, match=r"^fail_on_nonfinite=: 1 combinations have no kernel"):
        tapeloop.wavelet(v, 0, 0, [0, 1], fail_on_nonfinite=True)
    if HAS_CLI:
        np.save(tmp_path / "v.npy", v)
        args = [CLI, "wavelet", "--quiet", "--volume", str(tmp_path / "v.npy"), "--theta", "0", "--phi", "0",
                "--xi", "1,2", "--stat", "s=" + stats["s"]]
        cli = subprocess.run(args + ["--fail-on-nonfinite"], capture_output=True, text=True)
        flags = refused.replace("kernel= or stats=", "--kernel or --stat").replace("fail_on_nonfinite=", "--fail-on-nonfinite")
        assert cli.returncode != 0 and flags in cli.stderr, cli.stderr
        cli = subprocess.run(args, capture_output=True, text=True, check=True)
        header, *rows = cli.stdout.splitlines()
        assert header.split(",")[-1] == "s" and len(rows) == 2
        got = {name: [float(r.split(",")[i]) for r in rows] for i, name in enumerate(header.split(","))}
        for name in got:
            assert np.array_equal(got[name], kept[name], equal_nan=True), (name, got[name], kept[name])


def test_thousand_calls_flat_memory():
    """1,000 calls of one object after 200 more: the results the same, RSS
    flat. In a process of its own, as a user's loop runs: within the test
    session the Go collector's target grows with everything the earlier
    tests left alive, and RSS with it, whatever the calls do."""
    script = """
import sys
import numpy as np
import tapeloop
from helpers import calls_over_time
v = np.random.default_rng().standard_normal((12, 13, 11)).astype(np.float32)
sweep = ([0.0, np.pi / 4], [0.0], [1.0, 2.0])
with tapeloop.Wavelet(v, stats={"l1": "sum(abs(g))"}) as w:
    first = w(*sweep)
    got = {}
    early, late, rss0, rss1 = calls_over_time(lambda i: got.update(w(*sweep)), "wavelet 12×13×11, 4 combinations")
    assert rss1 - rss0 <= 8 << 20, (rss0, rss1)
    for name in first:
        np.testing.assert_array_equal(got[name], first[name])
    assert w.report()["calls"] >= 1 + 200 + 1000 and w.report()["workload"] == "wavelet"
"""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(here, ".."), here]))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    print(r.stdout)
    assert r.returncode == 0, r.stderr


def test_dot():
    with tapeloop.Wavelet(np.ones((4, 5, 6))) as w:
        dot = w.dot()
        assert "digraph" in dot and "WaveletResponse" in dot
    with pytest.raises(tapeloop.Error, match="closed"):
        w(0, 0, 1)


def test_kernel_reach():
    """A kernel is sampled over its own reach (a Gaussian of σ = 3 voxels:
    about 17), or over reach= voxels from its centre: both against NumPy's
    convolution of the volume extended as scipy.ndimage's reflect mode; a
    kernel that does not decay within the volume is refused."""
    signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng(16013)
    v = rng.standard_normal((29, 26, 31)).astype(np.float32)
    kernel = "exp(-(x^2+y^2+z^2)/18)*(1 + 0.3*sin(0.5*z))"

    def ref(h):
        x, y, z = np.meshgrid(*[np.arange(-h, h + 1)] * 3, indexing="ij")
        psi = np.exp(-(x**2 + y**2 + z**2) / 18) * (1 + 0.3 * np.sin(0.5 * z))
        g = signal.fftconvolve(np.pad(v.astype(np.float64), h, mode="symmetric"), psi, mode="valid")
        return np.array([(g**2).sum(), g.std(), g.max(), (psi**2).sum()])

    for reach, h in ((None, 24), (5, 5)):
        got = tapeloop.wavelet(v, 0, 0, 1, kernel=kernel, reach=reach)
        got = np.array([got[c][0] for c in ("energy", "std", "max", "wavelet_energy")])
        np.testing.assert_allclose(got, ref(h), rtol=1e-5)
    with pytest.raises(tapeloop.Error, match=r"^kernel=: θ = 0, φ = 0, ξ = 1: it does not decay within the volume"):
        tapeloop.wavelet(v[:12, :12, :12], 0, 0, 1, kernel=kernel)
    with pytest.raises(tapeloop.Error, match=r"^reach=: it is for kernel="):
        tapeloop.wavelet(v, 0, 0, 1, reach=3)
    for reach in (0, -2):  # a box of no voxels is refused, not taken for the kernel's own reach
        with pytest.raises(tapeloop.Error, match=rf"^reach= {reach}: want a half-width in voxels, at least 1"):
            tapeloop.wavelet(v, 0, 0, 1, kernel=kernel, reach=reach)


def test_kernel_on_the_volume_grid_in_meshgrid_order():
    """reach="volume" samples the kernel on a grid the size of the volume,
    centred as scipy.ndimage centres a kernel, and indexing="xy" runs its x
    along the volume's second axis, as np.meshgrid(x, y, z) makes it: the
    statistics of scipy.ndimage.convolve with that kernel. A statistic reads
    the combination's ξ and a."""
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = np.random.default_rng(16017)
    v = rng.standard_normal((13, 18, 9)).astype(np.float32)
    th, ph, xi, a = 0.4, 2.2, 3.0, 1.1
    kernel = "(3 - q)*exp(-q/2)*(1 + 0.3*tanh(x - 0.5*y))"

    def kern(x, y, z):
        u = x*np.cos(ph)*np.cos(th) - y*np.sin(th) + z*np.sin(ph)*np.cos(th)
        w = x*np.cos(ph)*np.sin(th) + y*np.cos(th) + z*np.sin(ph)*np.sin(th)
        t = -x*np.sin(ph) + z*np.cos(ph)
        q = (w/a)**2 + (u/(a*xi))**2 + (t/a)**2
        return (3 - q)*np.exp(-q/2)*(1 + 0.3*np.tanh(x - 0.5*y))

    ax = [np.arange(m) - m//2 for m in v.shape]
    for indexing, grid in (("ij", np.meshgrid(ax[0], ax[1], ax[2], indexing="ij")),
                           ("xy", np.meshgrid(ax[1], ax[0], ax[2]))):
        g = ndimage.convolve(v.astype(np.float64), kern(*grid))
        got = tapeloop.wavelet(v, th, ph, xi, a=a, kernel=kernel, reach="volume", indexing=indexing,
                               stats={"wt": "max(g)/sqrt(xi^2 + 2*a^2)"})
        got = np.array([got[c][0] for c in ("energy", "std", "max", "wt")])
        want = np.array([(g**2).sum(), g.std(), g.max(), g.max()/np.sqrt(xi**2 + 2*a**2)])
        np.testing.assert_allclose(got, want, rtol=1e-4)
    with pytest.raises(tapeloop.Error, match=r"^reach='far': want a half-width in voxels"):
        tapeloop.wavelet(v, 0, 0, 1, kernel=kernel, reach="far")
    with pytest.raises(tapeloop.Error, match=r"^indexing="):
        tapeloop.wavelet(v, 0, 0, 1, indexing="yx")


def test_response():
    """Wavelet.response gives the response G of one combination, the
    volume's shape, as scipy.ndimage.convolve gives it with the kernel on
    the volume's grid in np.meshgrid's "xy" order; its Σ G² is the call's
    energy."""
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = np.random.default_rng(16019)
    v = rng.standard_normal((11, 16, 9)).astype(np.float32)
    th, ph, xi = 1.1, 0.3, 2.0
    kernel = "(3 - q)*exp(-q/2)*(1 + 0.2*x)"
    with tapeloop.Wavelet(v, kernel=kernel, reach="volume", indexing="xy") as w:
        g = w.response(th, ph, xi)
        row = w(th, ph, xi)
        with pytest.raises(tapeloop.Error, match=r"ξ = 0"):
            w.response(0, 0, 0)
    ax = [np.arange(m) - m//2 for m in v.shape]
    x, y, z = np.meshgrid(ax[1], ax[0], ax[2])
    u = x*np.cos(ph)*np.cos(th) - y*np.sin(th) + z*np.sin(ph)*np.cos(th)
    s = x*np.cos(ph)*np.sin(th) + y*np.cos(th) + z*np.sin(ph)*np.sin(th)
    t = -x*np.sin(ph) + z*np.cos(ph)
    q = s**2 + (u/xi)**2 + t**2
    want = ndimage.convolve(v.astype(np.float64), (3 - q)*np.exp(-q/2)*(1 + 0.2*x))
    assert g.dtype == np.float32 and g.shape == v.shape
    np.testing.assert_allclose(g, want, atol=1e-4*np.abs(want).max())
    np.testing.assert_allclose((g.astype(np.float64)**2).sum(), row["energy"][0], rtol=1e-5)


def test_zero_kernel_warns():
    """A kernel= that is 0 at every sample of some combinations gives their
    rows of zeros and one warning naming how many and the first, as the
    CLI's; a kernel nowhere 0 gives none."""
    import warnings
    v = np.random.default_rng().standard_normal((17, 19, 15)).astype(np.float32)
    kernel = "where(theta > 1, 0, exp(-2*(x*x + y*y/(xi*xi) + z*z)))"
    with tapeloop.Wavelet(v, kernel=kernel) as w:
        with pytest.warns(UserWarning, match=r"^8 of 12 combinations have a kernel that is 0 at every sample "
                                             r"\(the first: θ = 1\.2, φ = 0, ξ = 1\)"):
            got = w([0.3, 1.2, 2], [0, 0.7], [1, 2])
        assert ((got["theta"] > 1) == (got["energy"] == 0)).all()
    with tapeloop.Wavelet(v, kernel="exp(-2*(x*x + y*y/(xi*xi) + z*z))") as w:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            w([0.3, 1.2, 2], [0, 0.7], [1, 2])
