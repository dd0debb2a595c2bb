"""A storm of SIGINTs during thousands of short calls: the process survives,
every result is right, and SIGINT still reaches Python's own handler. Each
case runs in a child process, so a crash is the child's return code (a
negative signal number) and fails the test instead of killing pytest."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

PKG = os.path.join(os.path.dirname(__file__), "..")

# The child: SIGINTs from another process every 100-200 µs while the main
# thread makes N short calls on one object of the given kind.
#
# mode "default": Python's own handler (KeyboardInterrupt) is installed, so
# each call is interruptible: a SIGINT during a call stops it, one between
# calls raises KeyboardInterrupt from Python's handler. KeyboardInterrupt
# can then surface at any line, so the loop sits inside several nested
# handlers (guarded) and keeps its count in S.
#
# mode "count": a Python handler that counts; calls are not interrupted and
# every SIGINT reaches the handler.
CHILD = textwrap.dedent(r"""
    import os, signal, sys, time
    # Python's own SIGINT handler, as an interactive session has it, even
    # when the tests run with SIGINT ignored (a background job of a shell
    # without job control): Python would keep it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import tapeloop

    kind, mode, N = sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = np.random.default_rng(5)
    if kind == "interp":
        table, q = rng.standard_normal((3, 16)), np.linspace(0.05, 0.95, 8).astype(np.float32)
        make = lambda: tapeloop.Interp(table)
        run = lambda r: r(q)
    elif kind == "affinity":
        X = rng.standard_normal((4, 8)).astype(np.float32)
        make = lambda: tapeloop.Affinity("l2", shape=X.shape)
        run = lambda r: r(X)
    elif kind == "drr":
        vol = rng.uniform(0, 0.03, (8, 9, 10)).astype(np.float32)
        make = lambda: tapeloop.DRR(vol, detector=(4, 5))
        poses = make().orbit(2)
        run = lambda r: r(poses)
    else:
        vol = rng.standard_normal((6, 7, 8))
        make = lambda: tapeloop.Wavelet(vol)
        run = lambda r: r(0.3, 0.2, 1.5)

    def same(a, b):
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        return np.array_equal(a, b)

    class S:
        tries = done = kb = count = bad = busy = step = t0 = took = 0

    def guarded(f, depth=8):
        while True:
            try:
                return f() if depth == 0 else guarded(f, depth - 1)
            except KeyboardInterrupt:
                S.kb += 1

    r = make()
    want = run(r)
    if mode == "count":
        signal.signal(signal.SIGINT, lambda s, f: setattr(S, "count", S.count + 1))
    # The sender starts after 0.3 s (this script is not yet guarded), writes
    # nowhere, and stops when this process is gone.
    storm = os.posix_spawn(sys.executable, [sys.executable, "-c", "\n".join([
        "import os, random, signal, sys, time",
        "pid, end = int(sys.argv[1]), time.monotonic() + 60",
        "time.sleep(0.3)",
        "while time.monotonic() < end and os.getppid() == pid:",
        "    os.kill(pid, signal.SIGINT)",
        "    time.sleep(random.uniform(50e-6, 200e-6))"]), str(os.getpid())], os.environ,
        file_actions=[(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)])
    end = time.monotonic() + 60

    def storm_started():
        while S.kb == 0 and S.count == 0:
            time.sleep(0.001)
        if S.busy == 0:  # once: a step is entered again after each escaped KeyboardInterrupt
            S.busy = time.monotonic() + 2

    def calls():
        # N calls at least, and for 2 s at least: short calls outrun N.
        while (S.tries < N or time.monotonic() < S.busy) and time.monotonic() < end:
            S.tries += 1
            try:
                got = run(r)
                S.done += 1
                if S.done % 97 == 0 and not same(got, want):
                    S.bad += 1
            except KeyboardInterrupt:
                S.kb += 1

    def start_clock():
        if S.t0 == 0:
            S.t0 = time.monotonic()

    def stop_clock():
        if S.took == 0:
            S.took = time.monotonic() - S.t0

    def stop_storm():
        try:
            os.kill(storm, signal.SIGTERM)
            os.waitpid(storm, 0)
        except OSError:  # gone, or reaped by a first try this one interrupted
            pass

    def storm_phase():
        # Every step, and the moves between them, inside one guard: a SIGINT
        # can land on any bytecode while the storm lasts. A step interrupted
        # is entered again; each is safe to repeat.
        steps = [storm_started, start_clock, calls, stop_clock, stop_storm, lambda: time.sleep(0.2)]
        while S.step < len(steps):
            try:
                steps[S.step]()
                S.step += 1
            except KeyboardInterrupt:
                S.kb += 1

    guarded(storm_phase)
    took = S.took
    print(f"{kind} {mode}: {S.tries} calls, {S.done} finished, in {took:.1f} s; {S.kb} KeyboardInterrupt, "
          f"{S.count} counted", flush=True)
    assert S.tries >= N, "the calls did not finish"
    assert S.done >= (S.tries if mode == "count" else 100), "too few calls finished"
    assert S.bad == 0, f"{S.bad} results differ during the storm"
    assert same(run(r), run(make())), "the object after the storm differs from a fresh one"
    if mode == "count":
        assert S.count > 100, "the handler saw too few SIGINTs"
        before = S.count
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        assert S.count == before + 1, "a SIGINT after the storm did not reach the handler"
    else:
        assert S.kb > 100, "too few KeyboardInterrupts during the storm"
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
            print("FAIL: SIGINT between calls did not raise KeyboardInterrupt")
            sys.exit(1)
        except KeyboardInterrupt:
            pass
    print("ok", flush=True)
""")


@pytest.mark.parametrize("mode", ["default", "count"])
@pytest.mark.parametrize("kind", ["interp", "affinity", "drr", "wavelet"])
def test_sigint_storm_during_short_calls(kind, mode):
    p = subprocess.run([sys.executable, "-c", CHILD, PKG, kind, mode, "10000"], capture_output=True, text=True,
                       timeout=240)
    print(p.stdout, p.stderr[-3000:])
    if p.returncode < 0:
        pytest.fail(f"the child died of {signal.Signals(-p.returncode).name}: {p.stderr[-1500:]}")
    assert p.returncode == 0 and p.stdout.endswith("ok\n"), p.stdout + p.stderr[-3000:]


# Python's handler replaced and restored between calls: the library's
# SIGINT handler is put back in front of it at the next call, so Ctrl-C
# stops a long call again, and meanwhile the replacement saw every SIGINT.
SWAP = textwrap.dedent(r"""
    import os, signal, sys, threading, time
    # Python's own SIGINT handler, as an interactive session has it, even
    # when the tests run with SIGINT ignored (a background job of a shell
    # without job control): Python would keep it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import tapeloop

    vol = np.random.default_rng(2).uniform(0, 0.03, (96, 96, 96)).astype(np.float32)
    r = tapeloop.DRR(vol, detector=(96, 96), batch=4)
    poses = r.orbit(4000)
    r(poses[:2])
    seen = []
    signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.1)
    assert seen == [signal.SIGINT], seen
    signal.signal(signal.SIGINT, signal.default_int_handler)
    t0 = time.perf_counter()
    r(poses[:8])
    assert (time.perf_counter() - t0) / 8 * 4000 > 3, "the long call would be too short"

    def ctrl_c():
        global sent
        sent = time.perf_counter()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Timer(0.5, ctrl_c).start()
    try:
        r(poses)
        print("FAIL: the call was not interrupted")
        sys.exit(1)
    except KeyboardInterrupt:
        print(f"interrupted after {time.perf_counter() - sent:.3f} s")
    assert seen == [signal.SIGINT], seen
""")


def test_ctrl_c_after_python_replaced_and_restored_its_handler():
    p = subprocess.run([sys.executable, "-c", SWAP, PKG], capture_output=True, text=True, timeout=300)
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    assert float(p.stdout.split("interrupted after ")[1].split(" s")[0]) < 1.0
