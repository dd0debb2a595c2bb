"""Objects that travel: pickling, copies, and the ways Python users run
work in parallel (multiprocessing's spawn, forkserver and fork, and
dask.distributed), each result compared bit for bit with the parent's."""
import copy
import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tapeloop
from parallel_workers import KINDS, call, call_and_close, call_pair, held_and_call, hold_own, make

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "..")


def assert_same(got, want, what):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=what)
    else:
        assert got.shape == want.shape and got.dtype == want.dtype, what
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("kind", KINDS)
def test_pickle_and_copies_build_new_objects(kind):
    obj, inp = make(kind, 7)
    want = call(obj, inp)
    for how, dup in [("pickle", lambda o: pickle.loads(pickle.dumps(o))),
                     ("pickle protocol 5", lambda o: pickle.loads(pickle.dumps(o, protocol=5))),
                     ("copy", copy.copy), ("deepcopy", copy.deepcopy)]:
        other = dup(obj)
        assert type(other) is type(obj)
        assert other._h and other._h != obj._h, f"{how}: a new object has a handle of its own"
        assert_same(call(other, inp), want, f"{kind} {how}")
        other.close()  # closing the copy leaves the original open
        assert_same(call(obj, inp), want, f"{kind} after its {how} closed")
    obj.close()


def test_pickle_sends_what_the_object_was_built_from():
    """The arrays the library copied at creation travel, not a later state
    of the caller's array; one changed in place since is refused, since
    the receiving process would compute with other values."""
    rng = np.random.default_rng()
    vol = rng.uniform(0, 0.02, (9, 8, 7)).astype(np.float32)
    r = tapeloop.DRR(vol, detector=(5, 6))
    p = r.orbit(3)
    want = r(p)
    blob = pickle.dumps(r)
    vol *= 2  # the caller's own array, taken without a copy
    with pytest.raises(tapeloop.Error, match=r"volume= was changed in place after the object was built"):
        pickle.dumps(r)
    assert_same(pickle.loads(blob)(p), want, "pickled before the change")
    # A volume the package converted (float64 here) is its own copy: the
    # caller's later changes do not reach it, and pickling goes on.
    v64 = rng.uniform(0, 0.02, (9, 8, 7))
    with tapeloop.DRR(v64, detector=(5, 6)) as a:
        w = a(p)
        v64[:] = 0
        with pickle.loads(pickle.dumps(a)) as b:
            assert_same(b(p), w, "a converted volume")
    f = rng.standard_normal((3, 11))
    with tapeloop.Interp(f) as it:
        f[0, 0] += 1
        with pytest.raises(tapeloop.Error, match=r"interp: f= was changed in place"):
            copy.deepcopy(it)
    r.close()
    with pytest.raises(tapeloop.Error, match=r"drr: the object is closed; a closed object cannot be pickled"):
        pickle.dumps(r)


def test_keywords_travel_as_given_at_creation():
    """A params dict the caller changes afterwards does not change what a
    copy computes."""
    x = np.random.default_rng().standard_normal((9, 5)).astype(np.float32)
    params = {"s": 2.0}
    with tapeloop.Affinity(formula="exp(-sum((a-b)^2)/s)", params=params, shape=x.shape) as r:
        want = r(x)
        params["s"] = 5.0
        with pickle.loads(pickle.dumps(r)) as c:
            assert_same(c(x), want, "params changed after creation")


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_pool_workers_holding_objects_of_their_own(method):
    """Each worker first builds objects of its own (handles 1…4 there), then
    gets the parent's objects as task arguments: their results are the
    parent's, bit for bit."""
    objs = [make(kind, 11 + i) for i, kind in enumerate(KINDS)]
    want = [call(o, x) for o, x in objs]
    ctx = mp.get_context(method)
    with ctx.Pool(2, initializer=hold_own) as pool:
        got = pool.map(call_pair, objs * 2, chunksize=1)
    for i, g in enumerate(got):
        assert_same(g, want[i % len(objs)], f"{method} task {i} ({KINDS[i % len(objs)]})")
    for o, _ in objs:
        assert_same(call(o, _), want[objs.index((o, _))], "the parent's own object after the pool")
        o.close()


SCRIPT = textwrap.dedent(r"""
    import multiprocessing as mp, os, pickle, sys
    import numpy as np
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    MODE = sys.argv[3]
    import tapeloop
    import parallel_workers as pw

    def fails_with_fork_error(f, *args):
        try:
            f(*args)
        except tapeloop.Error as e:
            return "forked after it loaded" in str(e)
        return False

    if __name__ == "__main__":
        if MODE == "preload":  # forkserver with tapeloop preloaded: the workers load the library
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["tapeloop", "parallel_workers"])
            objs = [pw.make(k, 21 + i) for i, k in enumerate(pw.KINDS)]
            want = [pw.call(o, x) for o, x in objs]
            with ctx.Pool(2) as pool:
                got = pool.map(pw.call_pair, objs, chunksize=1)
            for g, w in zip(got, want):
                assert (np.asarray(g) == np.asarray(w)).all()
            print("preload ok")
        elif MODE == "fork-before-load":  # forked before any object: the children load their own library
            ctx = mp.get_context("fork")
            with ctx.Pool(2) as pool:
                got = pool.starmap(pw.make_and_call, [(k, 31) for k in pw.KINDS])
            for k, g in zip(pw.KINDS, got):
                w = pw.make_and_call(k, 31)
                assert (np.asarray(g) == np.asarray(w)).all(), k
            print("fork before load ok")
        elif MODE == "fork-after-load":  # every path an object takes into a forked child is refused at once
            obj, x = pw.make("drr", 41)
            pw.GLOBAL = obj
            want = pw.call(obj, x)
            ctx = mp.get_context("fork")
            with ctx.Pool(2) as pool:
                as_argument = pool.starmap(fails_with_fork_error, [(pw.call, obj, x)] * 2)
                as_global = pool.starmap(fails_with_fork_error, [(pw.call_global, x)] * 2)
                unpickled = pool.starmap(fails_with_fork_error, [(pw.call_unpickled, pickle.dumps(obj), x)] * 2)
                new = pool.starmap(fails_with_fork_error, [(pw.make, "interp", 1)] * 2)
            assert all(as_argument) and all(as_global) and all(unpickled) and all(new), \
                (as_argument, as_global, unpickled, new)
            assert (pw.call(obj, x) == want).all()
            print("fork after load ok")
""")


@pytest.mark.parametrize("mode", ["preload", "fork-before-load", "fork-after-load"])
def test_start_methods_in_a_fresh_process(mode):
    """forkserver with tapeloop preloaded works; fork works where the parent
    made no object before forking, and is refused at once, never hung,
    where it did: for an object given as an argument, a global, an
    unpickled one and a new one."""
    p = subprocess.run([sys.executable, "-c", SCRIPT, PKG, HERE, mode], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and mode.replace("-", " ") in p.stdout, p.stdout + p.stderr


def test_dask_local_cluster_processes_and_threads():
    distributed = pytest.importorskip("distributed")
    objs = [make(kind, 51 + i) for i, kind in enumerate(KINDS)]
    want = [call(o, x) for o, x in objs]
    for processes in (True, False):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None,
                                      silence_logs=50) as cluster, distributed.Client(cluster) as client:
            if processes:
                held = client.run(hold_own)  # every worker holds objects of its own first
                assert all(len(h) == len(KINDS) for h in held.values())
            futures = [client.submit(held_and_call, o, x, pure=False) for o, x in objs for _ in range(2)]
            for i, g in enumerate(client.gather(futures)):
                assert_same(g, want[i // 2], f"dask processes={processes} task {i}")
            # A task that closes the object it got closes its own copy only.
            done = client.gather([client.submit(call_and_close, o, x, pure=False) for o, x in objs])
            for g, w in zip(done, want):
                assert_same(g, w, f"dask processes={processes}, closed in the task")
        for o, x in objs:
            assert_same(call(o, x), want[[p for p, _ in objs].index(o)], f"the parent's after dask processes={processes}")
    for o, _ in objs:
        o.close()


LIMIT_SCRIPT = textwrap.dedent(r"""
    import resource, sys, warnings
    sys.path.insert(0, sys.argv[1])
    resource.setrlimit(resource.RLIMIT_DATA, (3 << 30, 3 << 30))  # ulimit -d, as a cluster's job may have
    import numpy as np, tapeloop
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        r = tapeloop.Interp(np.ones((3, 9)), mem_limit="64GiB")
        quiet = tapeloop.Interp(np.ones((3, 9)), mem_limit="64MiB")
    print(len(got), got[0].filename if got else None)
    print(got[0].message if got else None)
""")


def test_mem_limit_above_the_ulimit_is_lowered_with_a_warning():
    p = subprocess.run([sys.executable, "-c", LIMIT_SCRIPT, PKG], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    first, message = p.stdout.splitlines()[:2]
    count, where = first.split()
    assert count == "1" and where == "<string>", p.stdout  # one warning (none for 64MiB), pointing at the caller
    assert message.startswith("mem_limit=64 GiB is more than ulimit -d 3145728 (3.0 GiB) leaves this process"), message
    assert "lowered to" in message
