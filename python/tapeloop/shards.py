"""Shards: one piece of a workload's call, computed anywhere (another process,
a Dask worker, a cluster job), and merge, which puts the pieces back together
into exactly what the whole call returns."""
import hashlib
import pickle

import numpy as np

from ._lib import Error, digest, integer

# The keywords an object is built from that change no value it computes:
# left out of a shard's fingerprint, so that workers may plan their own
# batches.
NOT_IN_RESULTS = ("batch", "block", "mem_limit", "shard")


def parse(shard):
    """shard= as (index, count): a pair (i, n) or the CLI's "i/n", with
    0 ≤ i < n."""
    if isinstance(shard, str):
        a, sep, b = shard.partition("/")
        try:
            pair = (int(a), int(b)) if sep else None
        except ValueError:
            pair = None
        if pair is None:
            raise Error(f"shard={shard!r}: want (i, n) or \"i/n\" with 0 ≤ i < n, e.g. (3, 8)")
    else:
        try:
            pair = tuple(shard)
        except TypeError:
            raise Error(f"shard={shard!r}: want (i, n) or \"i/n\" with 0 ≤ i < n, e.g. (3, 8)") from None
        if len(pair) != 2:
            raise Error(f"shard={shard!r}: want (i, n) or \"i/n\" with 0 ≤ i < n, e.g. (3, 8)")
    i, n = integer("shard", pair[0]), integer("shard", pair[1])
    if n < 1 or not 0 <= i < n:
        raise Error(f"shard={shard!r}: want (i, n) with 0 ≤ i < n, e.g. (3, 8)")
    return i, n


def rows(index, count, total):
    """The items [lo, hi) of shard index of count over total items, as the
    CLI's --shard i/n splits them: ⌊i·N/n⌋ to ⌊(i+1)·N/n⌋."""
    return index * total // count, (index + 1) * total // count


def split(shard, total, what):
    """shard= parsed, and its range of total items; a shard without any
    raises Error, as the CLI's --shard does."""
    i, n = parse(shard)
    lo, hi = rows(i, n, total)
    if lo >= hi:
        raise Error(f"shard=({i}, {n}): no {what} (the call has {total}, fewer than the shard count)")
    return i, n, lo, hi


def fingerprint(obj, *inputs):
    """What a shard's values depend on: the object's class and what it was
    built from (less NOT_IN_RESULTS), and the call's inputs (arrays or
    numbers), as 32 hex digits that any process computes alike."""
    kw, kept = obj._recipe
    built = {k: v for k, v in kw.items() if k not in NOT_IN_RESULTS}
    arrays = {name: d if d is not None else (None if a is None else digest(a)) for name, (a, d) in kept.items()}
    called = [digest(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x for x in inputs]
    blob = pickle.dumps((type(obj).__name__, sorted(built.items()), sorted(arrays.items()), called), protocol=4)
    return hashlib.sha256(blob).hexdigest()[:32]


class Shard:
    """One shard of a call: the items [lo, hi) of total (rows of an
    affinity matrix, poses of a DRR call, combinations of a wavelet sweep,
    query points of an interpolation), computed as the whole call computes
    them, bit for bit.

    value is what the call returns for those items alone: an array of hi − lo
    rows, a pair of them (top-k's indices and values) or a dict of columns.
    index and count are the shard's i and n; key is the fingerprint of what
    the values depend on (the object's settings and data, the call's
    inputs), which merge compares. A Shard pickles, so it comes back from
    any worker."""

    __slots__ = ("workload", "index", "count", "lo", "hi", "total", "key", "value")

    def __init__(self, workload, index, count, lo, hi, total, key, value):
        self.workload, self.index, self.count = workload, index, count
        self.lo, self.hi, self.total, self.key, self.value = lo, hi, total, key, value

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        for k in self.__slots__:
            setattr(self, k, state[k])

    def __repr__(self):
        return (f"<tapeloop.Shard {self.workload} {self.index}/{self.count}: items [{self.lo}, {self.hi}) "
                f"of {self.total}>")


def merge(shards):
    """The whole call's result from its shards, in any order: the arrays
    (or top-k pairs, or wavelet columns) of shards 0 … n−1 one after
    another, bit for bit what the unsharded call returns.

    Refused with Error, before anything is put together: no shards, a value
    that is not a Shard, shards of different calls (another workload,
    object, input or count), and a set that is not complete: the message
    names every missing and every duplicated shard, and the missing ones as
    a list to compute again."""
    parts = list(shards)
    if not parts:
        raise Error("merge: no shards")
    for k, s in enumerate(parts):
        if not isinstance(s, Shard):
            raise Error(f"merge: item {k} is a {type(s).__name__}, not a tapeloop.Shard (a call made with shard=)")
    first = parts[0]
    for s in parts[1:]:
        for field, what in (("workload", "workload"), ("count", "shard count"), ("total", "item count"),
                            ("key", "object, settings or input")):
            if getattr(s, field) != getattr(first, field):
                raise Error(f"merge: shard {s.index}/{s.count} and shard {first.index}/{first.count} come from "
                            f"different calls (their {what} differs: {getattr(s, field)!r} and "
                            f"{getattr(first, field)!r})")
    n = first.count
    seen = {}
    for s in parts:
        seen.setdefault(s.index, []).append(s)
    missing = [i for i in range(n) if i not in seen]
    twice = sorted(i for i, v in seen.items() if len(v) > 1)
    if missing or twice:
        said = []
        if missing:
            said.append(f"{len(missing)} of {n} shards missing: {', '.join(map(str, missing))} "
                        f"(compute shard=(i, {n}) for i in {missing})")
        if twice:
            said.append(f"given more than once: {', '.join(f'{i} ({len(seen[i])} times)' for i in twice)}")
        raise Error("merge: " + "; ".join(said))
    ordered = [seen[i][0] for i in range(n)]
    v = first.value
    if isinstance(v, dict):
        return {c: np.concatenate([s.value[c] for s in ordered]) for c in v}
    if isinstance(v, tuple):
        return tuple(np.concatenate([s.value[j] for s in ordered]) for j in range(len(v)))
    return np.concatenate([s.value for s in ordered])
