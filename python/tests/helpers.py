"""What the package's tests share: the CLI's path, the process's RSS, and
the 1,000-call run of a compiled object."""
import os
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CLI = os.environ.get("TAPELOOP_CLI", os.path.join(ROOT, "bin", "tapeloop"))


def rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def calls_over_time(call, what, calls=1000, warm=200, window=100):
    """Times `calls` calls of call(i) after `warm` more, prints the medians
    of the first and last `window` calls (pytest -s shows them), and returns
    them with the RSS before and after the timed calls. The times are for
    reading, not for asserting: the machine is shared and its speed drifts;
    bench/python_inproc.py measures the time per call."""
    for i in range(warm):  # to a steady state, the Go heap grown to its GC target
        call(i)
    rss0 = rss_bytes()
    times = []
    for i in range(calls):
        t0 = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - t0)
    rss1 = rss_bytes()
    early, late = np.median(times[:window]), np.median(times[-window:])
    print(f"\n{what} per call: first {window} median {early * 1e6:.1f} µs, last {window} {late * 1e6:.1f} µs; "
          f"RSS {rss0 / 2**20:.1f} → {rss1 / 2**20:.1f} MiB")
    return early, late, rss0, rss1
