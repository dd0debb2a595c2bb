"""Interp.grad against finite differences of a NumPy reference in float64."""
import numpy as np
import pytest

import tapeloop
from test_interp import reference

H = 1e-5  # the step of the queries' differences, in grid steps


def cost(f, a, dx, x, up, reduce):
    """Σ upstream · output, the output as Interp computes it, in float64."""
    v = reference(f, a, dx, x)
    out = {"sumsq": (v * v).sum(1), "sum": v.sum(1), "none": v}[reduce]
    return float((up * out).sum())


def queries(rng, n, a, dx, g):
    """Inside the grid, on nodes, a thousandth of a step from nodes, on both
    bounds, below a and above the last bound."""
    ub = a + (g + 1) * dx
    kinds = [rng.uniform(a, ub, n), a + rng.integers(0, g + 1, n) * dx,
             a + (rng.integers(0, g + 1, n) + rng.choice([-1e-3, 1e-3], n)) * dx,
             rng.choice([a, ub], n), a - rng.uniform(0.1, 3, n) * dx, ub + rng.uniform(0.1, 3, n) * dx]
    return np.choose(np.arange(n) % len(kinds), kinds)


def fd_queries(f, a, dx, x, up, reduce):
    """Per query: central differences, one-sided within 3 steps of the edge of
    its cell (the forward takes the cell on the right of a node), and looking
    away from the bound where the query is clamped (at the upper bound itself
    to the right, as the derivative is taken from the right everywhere)."""
    g, ub, e = f.shape[1], a + (f.shape[1] + 1) * dx, H * dx
    d = np.empty(len(x))
    for i, xv in enumerate(x):
        ui = up[i:i + 1]

        def c(v):
            return cost(f, a, dx, np.array([v]), ui, reduce)

        u = (xv - a) / dx
        left = (3 * c(xv) - 4 * c(xv - e) + c(xv - 2 * e)) / (2 * e)
        right = (-3 * c(xv) + 4 * c(xv + e) - c(xv + 2 * e)) / (2 * e)
        if xv < a:
            d[i] = left
        elif xv >= ub:  # clamped; at ub itself the derivative from the right too
            d[i] = right
        elif np.floor(u) + 1 - u < 3 * H:
            d[i] = left
        elif u - np.floor(u) < 3 * H:
            d[i] = right
        else:
            d[i] = (c(xv + e) - c(xv - e)) / (2 * e)
    return d


def fd_values(f, a, dx, x, up, reduce):
    d = np.empty(f.shape)
    for idx in np.ndindex(f.shape):
        e = 1e-4 * max(1.0, abs(f[idx]))
        fp, fm = f.copy(), f.copy()
        fp[idx] += e
        fm[idx] -= e
        d[idx] = (cost(fp, a, dx, x, up, reduce) - cost(fm, a, dx, x, up, reduce)) / (2 * e)
    return d


def close(got, want, tol):
    """Each element within tol of its own size (plus a thousandth of the
    largest): an error in one element is not averaged away."""
    assert np.abs(want).max() > 0
    np.testing.assert_array_less(np.abs(got - want), tol * (np.abs(want) + 1e-3 * np.abs(want).max()))


@pytest.mark.parametrize("reduce", ["sumsq", "sum", "none"])
@pytest.mark.parametrize("method", ["auto", "direct"])
def test_grad_against_finite_differences(reduce, method):
    rng = np.random.default_rng()
    m, g, n = 7, 23, 61
    f = rng.standard_normal((m, g)) + 0.25
    a, dx = rng.normal() * 2, 0.05 + rng.uniform()
    x = queries(rng, n, a, dx, g)
    up = rng.standard_normal((n, m) if reduce == "none" else n)
    # batch 16: blocks of 16 and a short last one, whose padding adds nothing.
    with tapeloop.Interp(f, a, dx, batch=16, reduce=reduce, method=method, dtype="float64") as r:
        d_x, d_values = r.grad(x, up)
        assert d_x.shape == (n,) and d_x.dtype == np.float64
        assert d_values.shape == (m, g) and d_values.dtype == np.float64
        close(d_x, fd_queries(f, a, dx, x, up, reduce), 1e-4)
        close(d_values, fd_values(f, a, dx, x, up, reduce), 1e-4)
        again = r.grad(x, up)  # the same again: nothing is left over from the call before
        np.testing.assert_array_equal(again[0], d_x)
        np.testing.assert_array_equal(again[1], d_values)


@pytest.mark.parametrize("reduce", ["sumsq", "none"])
def test_grad_float32_as_float64(reduce):
    """A float32 program computes the same formula in float64 from float32
    values and points: within float32's rounding of the float64 program's."""
    rng = np.random.default_rng()
    m, g, n = 5, 31, 203
    f = (rng.standard_normal((m, g)) + 0.25).astype(np.float32).astype(np.float64)
    a, dx = 0.5, 0.125
    x = queries(rng, n, a, dx, g).astype(np.float32)
    up = rng.standard_normal((n, m) if reduce == "none" else n).astype(np.float32)
    with tapeloop.Interp(f, a, dx, batch=64, reduce=reduce, dtype="float64") as r64, \
            tapeloop.Interp(f, a, dx, batch=64, reduce=reduce, dtype="float32") as r32:
        want = r64.grad(x.astype(np.float64), up.astype(np.float64))
        got = r32.grad(x.astype(np.float64), up)
    assert got[0].dtype == np.float32
    close(got[0], want[0], 1e-5)
    close(got[1], want[1], 1e-5)


def test_grad_refuses_formula_and_bad_shapes():
    f = np.arange(12.0).reshape(2, 6)
    with tapeloop.Interp(f, reduce="max(v)") as r, pytest.raises(tapeloop.Error, match="gradient"):
        r.grad(np.array([0.5]), np.array([1.0], np.float32))
    with tapeloop.Interp(f, reduce="none") as r, pytest.raises(tapeloop.Error, match="upstream"):
        r.grad(np.array([0.5, 0.6]), np.ones(2, np.float32))
