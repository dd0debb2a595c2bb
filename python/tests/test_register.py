"""DRR.loss_and_grad and DRR.register against NumPy: the gradient against
central differences of the loss, the loss against NCC and MSE of DRRs of
the moved volume (its poses moved by the inverse transform, in NumPy), a
known transform recovered, a far start reported, bad input refused."""
import pickle
import warnings

import numpy as np
import pytest

import tapeloop

SPACING = (2.0, 2.0, 2.0)


def smooth_volume(rng, n=32):
    """A random smooth volume: Gaussian blobs of attenuation per mm."""
    x = np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing="ij"), -1).astype(float)
    v = np.zeros((n,) * 3)
    for _ in range(14):
        c, s = rng.uniform(5, n - 5, 3), rng.uniform(1.5, 4.5)
        v += rng.uniform(0.3, 1) * np.exp(-((x - c) ** 2).sum(-1) / (2 * s * s))
    return (0.02 * v).astype(np.float32)


def centre_of(vol):
    return (np.array(vol.shape) - 1) / 2 * np.array(SPACING)


def rotation(w):
    """R(w) by Rodrigues' formula (w: rotation vector, radians)."""
    w = np.asarray(w, float)
    th = np.linalg.norm(w)
    k = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
    if th < 1e-12:
        return np.eye(3) + k
    return np.eye(3) + np.sin(th) / th * k + (1 - np.cos(th)) / th**2 * k @ k


def matrix(params, c):
    """The 4×4 matrix of T(x) = R(x − c) + c + t."""
    r = rotation(params[:3])
    m = np.eye(4)
    m[:3, :3] = r
    m[:3, 3] = c + np.asarray(params[3:]) - r @ c
    return m


def seen_from(poses, params, c):
    """The poses as seen from the volume moved by T: each moved by T⁻¹,
    T⁻¹(y) = Rᵀ(y − c − t) + c (points), Rᵀd (directions)."""
    r, t = rotation(params[:3]), np.asarray(params[3:])
    out = poses.copy()
    for a in (0, 3):
        out[:, a:a + 3] = (poses[:, a:a + 3] - c - t) @ r + c
    for a in (6, 9):
        out[:, a:a + 3] = poses[:, a:a + 3] @ r
    return out


def ncc_loss(a, b):
    """1 − the mean over views of the NCC of a and b (P, R, C)."""
    s = 0.0
    for x, y in zip(a.astype(np.float64), b.astype(np.float64)):
        x, y = x - x.mean(), y - y.mean()
        s += (x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum())
    return 1 - s / len(a)


def views(d, n=2):
    """n views 90° apart about z, through the volume's centre."""
    return d.orbit(4, sdd=1000.0, sid=500.0, pixel=2.5)[:n].copy()


def random_params(rng, degrees, mm):
    axis = rng.standard_normal(3)
    direction = rng.standard_normal(3)
    return np.concatenate([np.radians(degrees) * axis / np.linalg.norm(axis),
                           mm * direction / np.linalg.norm(direction)])


@pytest.fixture(scope="module")
def volume():
    return smooth_volume(np.random.default_rng())


def central_difference(f, x, i, f0, scale):
    """∂f/∂x_i by central differences at h = 1e-8, or 1e-9 where the
    interval of 1e-8 holds a kink of f (the forward and backward differences
    disagree by more than 2e-5·scale). The loss is smooth but at the poses
    where a ray's sample or path crosses a voxel plane or edge; they are
    dense for Siddon (a 1e-6 interval often holds several, and a central
    difference over it averages slopes); f's rounding, ~1e-15, costs
    ~1e-7 at h = 1e-8."""
    for h in (1e-8, 1e-9):
        e = np.zeros(6)
        e[i] = h
        fp, fm = (f(x + e) - f0) / h, (f0 - f(x - e)) / h
        if abs(fp - fm) <= 2e-5 * scale:
            break
    return (fp + fm) / 2


@pytest.mark.parametrize("method,loss,patch", [("trilinear", "ncc", 0), ("siddon", "ncc", 0), ("trilinear", "gncc", 0),
                                               ("trilinear", "ncc", 8), ("siddon", "mse", 0)])
def test_gradient_is_the_loss_derivative(volume, method, loss, patch):
    """grad against central differences of loss_and_grad's own loss at a
    random transform (the images are float64)."""
    rng = np.random.default_rng()
    with tapeloop.DRR(volume, SPACING, detector=(40, 40), method=method) as d:
        poses = views(d)
        targets = d(seen_from(poses, random_params(rng, 4, 4), centre_of(volume)))
        x = random_params(rng, 3, 3)
        f0, g = d.loss_and_grad(x, poses, targets, loss=loss, patch=patch)
        assert g.shape == (6,) and g.dtype == np.float64 and np.isfinite(f0) and f0 > 1e-4

        def f(y):
            return d.loss_and_grad(y, poses, targets, loss=loss, patch=patch)[0]

        fd = np.array([central_difference(f, x, i, f0, np.linalg.norm(g)) for i in range(6)])
        err = np.linalg.norm(g - fd) / np.linalg.norm(fd)
        assert err <= 1e-4, f"gradient {g}, central differences {fd}: relative error {err:.2g}"
        assert d._compiles == 1, "the registration was compiled again for the same poses and targets"


@pytest.mark.filterwarnings("ignore:step= 3 mm is longer")
@pytest.mark.parametrize("method,step", [("trilinear", None), ("trilinear", 3.0), ("siddon", None)])
def test_loss_is_ncc_of_the_moved_volumes_drrs(volume, method, step):
    """The loss is 1 − NCC (and the MSE) of the DRRs of the volume moved by
    the transform, rendered here by the object itself with the poses moved by
    the inverse transform in NumPy: with the object's method and step (a
    coarse step renders visibly different images)."""
    rng = np.random.default_rng()
    c = centre_of(volume)
    with tapeloop.DRR(volume, SPACING, detector=(36, 44), method=method, step=step) as d:
        poses = views(d, 3)
        targets = d(seen_from(poses, random_params(rng, 5, 5), c))
        x = random_params(rng, 5, 5)
        moved = d(seen_from(poses, x, c)).astype(np.float64)
        f, _ = d.loss_and_grad(x, poses, targets)
        want = ncc_loss(moved, targets)
        assert want > 1e-3
        assert abs(f - want) < 1e-5 * max(1, want), (f, want)
        f, _ = d.loss_and_grad(x, poses, targets, loss="mse")
        want = ((moved - targets) ** 2).mean()
        assert abs(f - want) < 1e-5 * want, (f, want)
        # the same transform as a dict about the volume's centre, and as a matrix
        f1, g1 = d.loss_and_grad({"rotation": x[:3], "translation": x[3:]}, poses, targets, loss="mse")
        f2, _ = d.loss_and_grad({"matrix": matrix(x, c)}, poses, targets, loss="mse")
        assert abs(f1 - f) < 1e-12 and abs(f2 - f) < 1e-9 * f
        # about another centre: the same motion, other parameters
        c2 = c + rng.uniform(-20, 20, 3)
        m = matrix(x, c)
        t2 = m[:3, 3] - c2 + m[:3, :3] @ c2
        f3, _ = d.loss_and_grad({"rotation": x[:3], "translation": t2, "center": c2}, poses, targets, loss="mse")
        assert abs(f3 - f) < 1e-9 * f
        assert d._compiles == 3  # ncc; mse; mse about c2


def test_compiled_once_and_replayed(volume):
    """A second call with the same poses, targets, loss and patch replays the
    compiled graph (the counter stays, and it is faster than the first);
    other targets compile again."""
    import time
    rng = np.random.default_rng()
    with tapeloop.DRR(volume, SPACING, detector=(48, 48), method="trilinear") as d:
        poses = views(d)
        targets = d(seen_from(poses, random_params(rng, 3, 3), centre_of(volume)))
        t0 = time.perf_counter()
        d.loss_and_grad(np.zeros(6), poses, targets)
        first = time.perf_counter() - t0
        assert d._compiles == 1
        t0 = time.perf_counter()
        for _ in range(5):
            d.loss_and_grad(random_params(rng, 2, 2), poses, targets.copy())
        again = (time.perf_counter() - t0) / 5
        assert d._compiles == 1
        assert again < first, (first, again)
        d.loss_and_grad(np.zeros(6), poses, targets * 1.5)
        assert d._compiles == 2
        d.loss_and_grad(np.zeros(6), poses, targets * 1.5, patch=8)
        assert d._compiles == 3


def mtre(m1, m2, vol):
    """Mean distance between the two transforms' images of a 10³ grid over
    the volume's voxel centres."""
    g = np.stack(np.meshgrid(*[np.linspace(0, n - 1, 10) for n in vol.shape], indexing="ij"), -1).reshape(-1, 3)
    p = np.c_[g * np.array(SPACING), np.ones(len(g))]
    return np.linalg.norm((p @ m1.T - p @ m2.T)[:, :3], axis=1).mean()


@pytest.mark.parametrize("method", ["trilinear", "siddon"])
def test_register_recovers_a_known_transform(volume, method):
    """Targets rendered by a Siddon DRR of the volume moved by a known
    transform (5° about a random axis, 5 mm: poses moved by its inverse in
    NumPy) are registered from the identity to mTRE < 1 mm, by a trilinear
    DRR (as the CLI's register) and by a Siddon one."""
    rng = np.random.default_rng()
    c = centre_of(volume)
    truth = random_params(rng, 5, 5)
    with tapeloop.DRR(volume, SPACING, detector=(64, 64), method="siddon") as s:
        poses = views(s)
        targets = s(seen_from(poses, truth, c))
    with tapeloop.DRR(volume, SPACING, detector=(64, 64), method=method) as d:
        start = mtre(matrix(np.zeros(6), c), matrix(truth, c), volume)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = d.register(targets, poses)
    err = mtre(np.array(r.transform["matrix"]), matrix(truth, c), volume)
    assert err < 1.0, f"mTRE {err:.3f} mm from {start:.2f} mm"
    # Siddon's loss has kinks wherever a ray crosses a voxel edge: near the
    # minimum of the same renderer's targets (a loss of ~1e-14) its line
    # search can fail, which is a minimum like any other.
    assert r.converged and r.reason == "" and not w, (r.reason, [str(x.message) for x in w])
    assert r.transform["frame"] == "lps" and np.allclose(r.transform["center"], c)
    assert np.allclose(matrix(np.r_[r.transform["rotation"], r.transform["translation"]], c), r.transform["matrix"])
    t = r.trace
    assert set(t.dtype.names) == {"step", "level", "loss", "rx", "ry", "rz", "tx", "ty", "tz", "seconds"}
    assert len(t) > 3 and list(t["step"]) == list(range(len(t))) and set(t["level"]) == {0, 1, 2}
    assert np.all(np.diff(t["seconds"]) >= 0) and r.evaluations >= len(t)
    assert r.loss < 0.01 and abs(t["loss"][-1] - r.loss) < 0.01


def textured_volume(rng, n=32):
    """Random texture: white noise smoothed over ~1.5 voxels, clipped at 0;
    NCC has local minima well above accept= away from the truth. (On the
    smooth blobs the coarse-to-fine NCC often captures even 60°.)"""
    x = np.fft.fftn(rng.standard_normal((n,) * 3))
    k = np.stack(np.meshgrid(*[np.fft.fftfreq(n)] * 3, indexing="ij"))
    x *= np.exp(-2 * (np.pi * 1.5) ** 2 * (k ** 2).sum(0))
    v = np.fft.ifftn(x).real
    return (0.02 * np.clip(v / v.std() + 0.5, 0, None)).astype(np.float32)


def test_far_start_is_not_converged_and_warns():
    """From 120° off the truth the run ends in a local minimum above
    accept: converged=False, with its reason, and a RuntimeWarning, never a
    silent success."""
    rng = np.random.default_rng()
    volume = textured_volume(rng)
    c = centre_of(volume)
    truth = random_params(rng, 3, 3)
    with tapeloop.DRR(volume, SPACING, detector=(48, 48), method="trilinear") as d:
        poses = views(d)
        targets = d(seen_from(poses, truth, c))
        far = truth + np.r_[random_params(rng, 120, 0)[:3], 0, 0, 0]
        with pytest.warns(RuntimeWarning, match=r"not converged: .*above accept= ?0\.1") as w:
            r = d.register(targets, poses, init=far)
    assert len(w) == 1
    assert not r.converged and r.reason and r.loss > 0.1
    assert mtre(np.array(r.transform["matrix"]), matrix(truth, c), volume) > 1.0


def test_bad_input_raises_one_line(volume):
    rng = np.random.default_rng()
    with tapeloop.DRR(volume, SPACING, detector=(16, 16)) as d:
        poses = views(d)
        targets = d(poses)
        bad_rotation = matrix(np.zeros(6), centre_of(volume))
        bad_rotation[:3, :3] *= 1.1
        reflection = np.diag([1.0, 1.0, -1.0, 1.0])
        nan = targets.astype(np.float64)
        nan[1, 3, 4] = np.nan
        cases = [
            (dict(targets=targets[:1]), r"targets=: shape \(1, 16, 16\), want \(2, 16, 16\)"),
            (dict(targets=targets[:, :15]), r"targets=: shape"),
            (dict(targets=nan), r"targets=: image 1, pixel \(3, 4\) is nan"),
            (dict(transform={"matrix": bad_rotation}), r"transform=: not a rigid transform"),
            (dict(transform={"matrix": reflection}), r"reflection"),
            (dict(transform={"matrix": np.eye(3)}), r"matrix of shape \(3, 3\)"),
            (dict(transform={"rotation": [0, 0], "translation": [0, 0, 0]}), r"rotation=: want 3 numbers"),
            (dict(transform={"rotation": [0, 0, np.inf], "translation": [0, 0, 0]}), r"not a finite number"),
            (dict(transform={"rotaton": [0, 0, 0]}), r"unknown key 'rotaton'"),
            (dict(transform={"frame": "ras", "rotation": [0, 0, 0]}), r"frame"),
            (dict(transform=np.zeros(5)), r"want a dict as transform.json or 6 numbers"),
            (dict(loss="l2"), r"unknown kind \"l2\""),
            (dict(patch=-1), r"patch"),
            (dict(poses=np.zeros((2, 13))), r"poses: shape"),
        ]
        for kw, msg in cases:
            args = dict(transform=np.zeros(6), poses=poses, targets=targets)
            args.update(kw)
            with pytest.raises(tapeloop.Error, match=msg) as e:
                d.loss_and_grad(**args)
            assert "\n" not in str(e.value), str(e.value)
        with pytest.raises(tapeloop.Error, match=r"init=: not a rigid transform"):
            d.register(targets, poses, init={"matrix": bad_rotation})
        with pytest.raises(tapeloop.Error, match=r"levels= ?0: want 1 to 6"):
            d.register(targets, poses, levels=0)
        with pytest.raises(tapeloop.Error, match=r"max_steps= ?0: want at least 1"):
            d.register(targets, poses, max_steps=0)
        with pytest.raises(tapeloop.Error, match=r"method=: 'adam'"):
            d.register(targets, poses, method="adam")
        f, g = d.loss_and_grad(np.zeros(6), poses, targets)  # still usable
        assert np.isfinite(f) and np.isfinite(g).all()
    with tapeloop.DRR(volume, SPACING, detector=(16, 16), post="exp(-p)") as d:
        with pytest.raises(tapeloop.Error, match=r"post=.*line integrals"):
            d.loss_and_grad(np.zeros(6), poses, targets)


def test_pickles_and_closes_with_its_registration(volume):
    """A DRR holding a compiled registration pickles by its recipe; the copy
    compiles its own on demand and gives the same loss and gradient."""
    rng = np.random.default_rng()
    d = tapeloop.DRR(volume, SPACING, detector=(24, 24), method="trilinear")
    poses = views(d)
    targets = d(seen_from(poses, random_params(rng, 3, 3), centre_of(volume)))
    x = random_params(rng, 2, 2)
    f, g = d.loss_and_grad(x, poses, targets)
    e = pickle.loads(pickle.dumps(d))
    assert e._compiles == 0
    f2, g2 = e.loss_and_grad(x, poses, targets)
    assert f2 == f and np.array_equal(g2, g) and e._compiles == 1
    reg = d._reg_eval[1]
    d.close()
    assert d._reg_eval is None and not reg._h
    with pytest.raises(tapeloop.Error, match="closed"):
        d.loss_and_grad(x, poses, targets)
    e.close()


def test_docs_example_runs():
    """docs/python.md's example of "Registration and gradients" runs as
    shown and finds its transform."""
    import os
    import re
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")
    with open(path) as f:
        text = f.read()
    section = text.split("## Registration and gradients", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section.split("**With tapeloop.**", 1)[1], re.S)[0]
    ns = {}
    exec(compile(code, "docs/python.md", "exec"), ns)
    assert ns["res"].converged and ns["err"] < 0.5, (ns["res"].reason, ns["err"])
    assert ns["grad"].shape == (6,) and ns["loss"] > 0.01


def test_interrupt_stops_register_and_leaves_it_usable():
    """interrupt() from another thread stops a register() in progress
    (KeyboardInterrupt in its thread, saying so), and the object then
    registers and evaluates as before."""
    import threading
    import time
    rng = np.random.default_rng()
    vol = smooth_volume(rng, 48)
    c = centre_of(vol)
    with tapeloop.DRR(vol, SPACING, detector=(160, 160), method="trilinear") as d:
        poses = views(d)
        targets = d(seen_from(poses, random_params(rng, 5, 5), c))
        out = {}

        def work():
            t0 = time.perf_counter()
            try:
                out["result"] = d.register(targets, poses, levels=1, tolerance=0, max_steps=1000)
            except KeyboardInterrupt as e:
                out["error"] = e
            out["seconds"] = time.perf_counter() - t0

        th = threading.Thread(target=work)
        th.start()
        while d._reg_run is None and th.is_alive():
            time.sleep(0.005)
        time.sleep(0.05)
        d.interrupt()
        th.join()
        assert "error" in out, f"register ran to its end in {out['seconds']:.2f} s before interrupt()"
        assert "interrupt() was called" in str(out["error"])
        f, g = d.loss_and_grad(np.zeros(6), poses, targets)
        assert np.isfinite(f) and np.isfinite(g).all()
