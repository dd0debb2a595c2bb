"""One object called from several threads: each call's warnings are its
own, Ctrl-C ends the main thread's wait for the object, and interrupt()
stops a call from another thread."""
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np

import pytest

import tapeloop

PKG = os.path.join(os.path.dirname(__file__), "..")


def warned_by(calls):
    """Runs calls[i]() in thread i, each a list of (call, want) pairs, with
    warnings.warn's output caught per thread: the warnings a call gives are
    those its thread shows while the call runs, since warnings.warn runs in
    the thread of the call that warns. Returns, per thread, the indices of
    the calls whose warnings differ from their want (a list of lines)."""
    shown = {}  # thread ident → the lines it showed, in order

    def show(message, category, filename, lineno, file=None, line=None):
        shown.setdefault(threading.get_ident(), []).append(str(message))

    bad = [[] for _ in calls]
    errors = []

    def loop(i):
        mine = shown.setdefault(threading.get_ident(), [])
        try:
            for k, (call, want) in enumerate(calls[i]):
                n = len(mine)
                call()
                if mine[n:] != want:
                    bad[i].append(k)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    # One catch for every thread, set before they start and left after they
    # end: catch_warnings itself is not thread-safe.
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        ts = [threading.Thread(target=loop, args=(i,)) for i in range(len(calls))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not errors, errors
    return bad


def lines_of(call):
    """The warnings call() gives on its own, a line each."""
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in log]


def test_drr_warnings_belong_to_their_call():
    """Two threads on one DRR object, 300 calls each: one thread's poses put
    the source inside the volume (a warning), the other's are sound. Every
    call shows its own warning and no other."""
    vol = np.random.default_rng(11).uniform(0, 0.03, (12, 13, 14)).astype(np.float32)
    with tapeloop.DRR(vol, detector=(6, 7)) as r:
        sound = r.orbit(2)
        inside = r.orbit(2, sid=3.0, sdd=500.0)  # the source 3 mm from the centre
        want_inside, want_sound = lines_of(lambda: r(inside)), lines_of(lambda: r(sound))
        assert want_sound == [] and len(want_inside) == 1 and "inside" in want_inside[0], want_inside
        bad = warned_by([[(lambda: r(inside), want_inside)] * 300, [(lambda: r(sound), want_sound)] * 300])
    assert bad == [[], []], f"{len(bad[0])} of 300 warning calls and {len(bad[1])} of 300 sound calls " \
                            f"showed the wrong warnings"


def test_wavelet_zero_kernel_warning_belongs_to_its_call():
    """As for the DRR: a Wavelet whose kernel is 0 at every sample for
    θ > 1, one thread sweeping θ = 2 (a warning), the other θ = 0.5."""
    v = np.random.default_rng(12).standard_normal((9, 10, 11)).astype(np.float32)
    kernel = "where(theta > 1, 0, exp(-2*(x*x + y*y/(xi*xi) + z*z)))"
    with tapeloop.Wavelet(v, kernel=kernel) as w:
        want_zero, want_none = lines_of(lambda: w(2.0, 0.0, 1.0)), lines_of(lambda: w(0.5, 0.0, 1.0))
        assert want_none == [] and len(want_zero) == 1 and "kernel that is 0" in want_zero[0], want_zero
        bad = warned_by([[(lambda: w(2.0, 0.0, 1.0), want_zero)] * 150, [(lambda: w(0.5, 0.0, 1.0), want_none)] * 150])
    assert bad == [[], []], bad


def long_drr():
    """A DRR object, its poses for a call of a few seconds, and a fresh
    object's images of the first three."""
    vol = np.random.default_rng(7).uniform(0, 0.03, (96, 96, 96)).astype(np.float32)
    r = tapeloop.DRR(vol, detector=(96, 96), batch=4)
    t0 = time.perf_counter()
    r(r.orbit(8))
    per_pose = (time.perf_counter() - t0) / 8
    poses = r.orbit(min(400000, max(4000, int(6 / per_pose))))  # a call of about 6 s on this machine, at least
    with tapeloop.DRR(vol, detector=(96, 96)) as fresh:
        want = fresh(poses[:3])
    return r, poses, lambda got: np.array_equal(got, want)


def long_wavelet():
    """As long_drr, for a Wavelet sweep."""
    v = np.random.default_rng(8).standard_normal((40, 40, 40)).astype(np.float32)
    w = tapeloop.Wavelet(v, batch=2)
    theta = np.linspace(0, 3, 60)
    w(0.05, 0.5, 1.5)  # the volume's transform, made once
    t0 = time.perf_counter()
    w(theta[:4], 0.5, [1.5, 2.0])
    per = (time.perf_counter() - t0) / 8
    xi = np.linspace(1.2, 3, max(2, int(6 / per / 60) + 1))
    assert per * 60 * xi.size > 3, f"the long call would take only {per * 60 * xi.size:.1f} s"
    with tapeloop.Wavelet(v) as fresh:
        want = fresh(theta[:3], 0.5, xi[:2])
    same = lambda got: got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    return w, (theta, 0.5, xi), lambda got: same(got)


@pytest.mark.parametrize("make", [long_drr, long_wavelet], ids=["drr", "wavelet"])
def test_interrupt_stops_a_call_from_another_thread(make):
    """interrupt() from the main thread stops a long call in a worker at its
    next block: the worker's call raises KeyboardInterrupt saying so, well
    within a second, and the object's next call equals a fresh object's."""
    obj, args, right = make()
    with obj:
        if isinstance(args, tuple):
            call, first3 = lambda: obj(*args), lambda: obj(args[0][:3], args[1], args[2][:2])
        else:
            call, first3 = lambda: obj(args), lambda: obj(args[:3])
        ended = {}

        def worker():
            try:
                call()
                ended["result"] = "finished"
            except BaseException as e:
                ended["result"] = e
            ended["at"] = time.perf_counter()

        t = threading.Thread(target=worker)
        t.start()
        time.sleep(0.5)  # the worker's call is under way
        sent = time.perf_counter()
        obj.interrupt()
        t.join(60)
        took = ended["at"] - sent
        print(f"the call ended {took:.3f} s after interrupt(): {ended['result']!r}")
        assert isinstance(ended["result"], KeyboardInterrupt), ended["result"]
        assert "interrupt() was called on the object" in str(ended["result"])
        assert took < 1.0
        assert right(first3())


def test_interrupt_without_a_call_does_nothing():
    """interrupt() with no call in progress leaves the next call whole;
    on a closed object it does nothing either."""
    vol = np.random.default_rng(9).uniform(0, 0.03, (20, 21, 22)).astype(np.float32)
    r = tapeloop.DRR(vol, detector=(16, 16), batch=2)
    poses = r.orbit(7)
    want = tapeloop.DRR(vol, detector=(16, 16))(poses)
    for _ in range(3):
        r.interrupt()
        assert np.array_equal(r(poses), want)
    r.close()
    r.interrupt()


# The main thread calls an object while a worker's long call has it, and
# Ctrl-C comes: the main thread's call ends at once, saying it was waiting;
# the worker's call, which Ctrl-C does not stop, runs to its end.
WAITING = textwrap.dedent(r"""
    import os, signal, sys, threading, time
    # Python's own SIGINT handler, as an interactive session has it, even
    # when the tests run with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import tapeloop

    vol = np.random.default_rng(7).uniform(0, 0.03, (96, 96, 96)).astype(np.float32)
    r = tapeloop.DRR(vol, detector=(96, 96), batch=4)
    t0 = time.perf_counter()
    r(r.orbit(8))
    per_pose = (time.perf_counter() - t0) / 8
    poses = r.orbit(min(200000, max(1500, int(4 / per_pose))))  # a call of about 4 s on this machine, at least
    want = tapeloop.DRR(vol, detector=(96, 96))(poses[:3])
    got = {}

    def worker():
        got["images"] = r(poses)
        got["at"] = time.perf_counter()

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.3)  # the worker has the object

    def ctrl_c():
        global sent
        sent = time.perf_counter()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Timer(0.5, ctrl_c).start()
    try:
        r(poses[:2])
        print("FAIL: the waiting call was not interrupted")
        sys.exit(1)
    except KeyboardInterrupt as e:
        print(f"interrupted after {time.perf_counter() - sent:.3f} s: {e}", flush=True)
    t.join()
    assert got["at"] - sent > 0.5, "the worker's call ended with the Ctrl-C"
    assert (got["images"][:3] == want).all(), "the worker's images"
    assert (r(poses[:3]) == want).all(), "the object after the interrupt differs"
    threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        time.sleep(5)
        print("FAIL: SIGINT outside a call did not raise KeyboardInterrupt")
        sys.exit(1)
    except KeyboardInterrupt:
        print("python's handler is back")
""")


def test_ctrl_c_ends_the_wait_for_an_object():
    p = subprocess.run([sys.executable, "-c", WAITING, PKG], capture_output=True, text=True, timeout=300)
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    took, msg = p.stdout.split("interrupted after ")[1].split(" s: ", 1)
    assert "waiting for the object" in msg, msg
    assert float(took) < 1.0
    assert "python's handler is back" in p.stdout
