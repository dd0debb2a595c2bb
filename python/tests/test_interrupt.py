"""Ctrl-C during a long call, and calls from several Python threads."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np

import pytest

import tapeloop
from tapeloop import _lib

SCRIPT = textwrap.dedent(r"""
    import os, signal, sys, threading, time
    # Python's own SIGINT handler, as an interactive session has it, even
    # when the tests run with SIGINT ignored (a background job of a shell
    # without job control): Python would keep it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import tapeloop

    rng = np.random.default_rng(7)
    vol = rng.uniform(0, 0.03, (96, 96, 96)).astype(np.float32)
    r = tapeloop.DRR(vol, detector=(96, 96), batch=4)
    poses = r.orbit(4000)
    t0 = time.perf_counter()
    r(poses[:8])
    per_pose = (time.perf_counter() - t0) / 8
    assert per_pose * 4000 > 3, f"the long call would take only {per_pose * 4000:.1f} s"

    def ctrl_c():
        global sent
        sent = time.perf_counter()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Timer(0.5, ctrl_c).start()
    try:
        r(poses)
        print("FAIL: the call was not interrupted")
        sys.exit(1)
    except KeyboardInterrupt as e:
        print(f"interrupted after {time.perf_counter() - sent:.3f} s: {e}")
    want = tapeloop.DRR(vol, detector=(96, 96))(poses[:3])
    assert (r(poses[:3]) == want).all(), "the object after the interrupt differs"
    assert r.report()["calls"] == 2
    # Ctrl-C between calls is Python's again.
    threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        time.sleep(5)
        print("FAIL: SIGINT outside a call did not raise KeyboardInterrupt")
        sys.exit(1)
    except KeyboardInterrupt:
        print("python's handler is back")
""")


def test_ctrl_c_interrupts_a_long_call_within_a_second():
    pkg = os.path.join(os.path.dirname(__file__), "..")
    p = subprocess.run([sys.executable, "-c", SCRIPT, pkg], capture_output=True, text=True, timeout=300)
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    took = float(p.stdout.split("interrupted after ")[1].split(" s")[0])
    assert took < 1.0
    assert "python's handler is back" in p.stdout


def test_threads_share_and_split_objects():
    """Two threads on one object (calls take turns) and a third on another
    object (runs beside them); each result equals the single-threaded one."""
    rng = np.random.default_rng()
    x = [rng.standard_normal((48, 300)).astype(np.float32) for _ in range(2)]
    objs = [tapeloop.Affinity("l2", shape=(48, 300)) for _ in range(2)]
    vol = rng.uniform(0, 0.03, (20, 21, 22)).astype(np.float32)
    drr = tapeloop.DRR(vol, detector=(16, 16))
    poses = drr.orbit(5)
    want = [o(xi) for o, xi in zip(objs, x)] + [drr(poses)]
    bad = []

    def loop(i):
        for _ in range(150):
            got = drr(poses) if i == 2 else objs[i](x[i])
            if not np.array_equal(got, want[i]):
                bad.append(i)

    ts = [threading.Thread(target=loop, args=(i,)) for i in (0, 0, 1, 2, 2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for o in objs + [drr]:
        o.close()
    assert not bad


def test_a_panic_in_the_library_is_an_error():
    with pytest.raises(tapeloop.Error, match=r"^internal error \(a bug in tapeloop\): assignment to entry in nil map"):
        _lib.check(_lib.lib.tl_selftest(1))
    _lib.check(_lib.lib.tl_selftest(0))
    assert tapeloop.interp(np.ones((2, 5)), np.array([0.5], np.float32)).shape == (1,)  # the process is fine


def test_byte_order_and_dtype_are_taken_as_numpy_says():
    """A big-endian array is converted by the one-shot functions and the
    creators (as NumPy reads it, not as its bytes), and refused by a compiled
    object's call, which converts nothing."""
    rng = np.random.default_rng()
    x = rng.standard_normal((17, 9))
    want = tapeloop.affinity(x, "l2", dtype="float64")
    np.testing.assert_array_equal(tapeloop.affinity(x.astype(">f8"), "l2", dtype="float64"), want)
    with tapeloop.Affinity("l2", shape=x.shape, dtype="float64") as r:
        with pytest.raises(tapeloop.Error, match=r"X: dtype >f8, the compiled dtype is float64"):
            r(x.astype(">f8"))
    vol = rng.uniform(0, 0.02, (9, 10, 11))
    with tapeloop.DRR(vol.astype(">f4"), detector=(5, 6)) as a, tapeloop.DRR(vol.astype(np.float32), detector=(5, 6)) as b:
        p = a.orbit(3)
        np.testing.assert_array_equal(a(p), b(p))


FORK_SCRIPT = textwrap.dedent(r"""
    import os, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import tapeloop

    x = np.random.default_rng(3).standard_normal((16, 8)).astype(np.float32)
    r = tapeloop.Affinity("l2", shape=x.shape)
    want = r(x)
    pid = os.fork()
    if pid == 0:  # the child: every use refused at once, none hangs
        code = 0
        for what, f in [("call", lambda: r(x)), ("create", lambda: tapeloop.Affinity("l2", shape=x.shape)),
                        ("one-shot", lambda: tapeloop.interp(np.ones((2, 5)), np.zeros(3, np.float32)))]:
            try:
                f()
                print("FAIL:", what, "was not refused", flush=True)
                code = 1
            except tapeloop.Error as e:
                if "forked after it loaded tapeloop" not in str(e):
                    print("FAIL:", what, e, flush=True)
                    code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "the child"
    assert (r(x) == want).all(), "the parent's object after the fork"
    print("fork ok")
""")


def test_a_forked_child_is_refused_not_hung():
    pkg = os.path.join(os.path.dirname(__file__), "..")
    p = subprocess.run([sys.executable, "-c", FORK_SCRIPT, pkg], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "fork ok" in p.stdout, p.stdout + p.stderr
