"""Shims that let DiffDRR's renderer run on Debian's torch 1.13.1 without its PyPI dependencies.

install() must run before `import diffdrr`. What it changes, exactly:

- fastcore (not in Debian): a module `fastcore.basics` whose `patch` does what fastcore's does
  for the uses in drr.py and detector.py: it sets the decorated function as an attribute of
  the class named by the annotation of its first parameter (`self: DRR`).
- torchio (not in Debian): a module `torchio` with a `Subject` class only. drr.py imports it for
  a type annotation; the subject DRR reads is built by diffdrr_register.py (make_subject) with
  the attributes DRR.__init__ reads: volume.affine, density.data, mask, reorient.
- einops (not in Debian): `einops.rearrange` for the one pattern metrics.to_patches uses,
  "b c p1 p2 h w -> b (c p1 p2) h w" (a reshape of a contiguous tensor).
- torch 1.13: Tensor.any(dim=[...]) with several dimensions came in torch 2.2; renderers.py's
  Siddon filter calls good_idxs.any(dim=[0, 1]). Tensor.any is wrapped so that a list or tuple
  of dims reduces one dimension at a time (the same result); every other call is passed through.
"""

import sys
import types

import torch


def _patch(f):
    cls = next(iter(f.__annotations__.values()))
    if isinstance(cls, str):  # `from __future__ import annotations`: resolve in f's module
        cls = eval(cls, f.__globals__)
    setattr(cls, f.__name__, f)
    return f


class Subject(dict):
    """torchio.Subject stand-in: a dict whose keys are also attributes."""

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError as e:
            raise AttributeError(k) from e


def _rearrange(x, pattern):
    if pattern.replace(" ", "") != "bcp1p2hw->b(cp1p2)hw":
        raise NotImplementedError(f"shims: einops pattern {pattern!r}")
    b, c, p1, p2, h, w = x.shape
    return x.reshape(b, c * p1 * p2, h, w)


_any = torch.Tensor.any


def _any_dims(self, *args, **kwargs):
    dim = kwargs.get("dim", args[0] if args else None)
    if isinstance(dim, (list, tuple)):
        keep = kwargs.get("keepdim", False)
        out = self
        for d in sorted((d % self.dim() for d in dim), reverse=True):
            out = _any(out, dim=d, keepdim=keep)
        return out
    return _any(self, *args, **kwargs)


def install():
    if "fastcore.basics" not in sys.modules:
        fc = types.ModuleType("fastcore")
        fb = types.ModuleType("fastcore.basics")
        fb.patch = _patch
        fc.basics = fb
        sys.modules["fastcore"], sys.modules["fastcore.basics"] = fc, fb
    if "torchio" not in sys.modules:
        tio = types.ModuleType("torchio")
        tio.Subject = Subject
        sys.modules["torchio"] = tio
    if "einops" not in sys.modules:
        ein = types.ModuleType("einops")
        ein.rearrange = _rearrange
        sys.modules["einops"] = ein
    if torch.Tensor.any is _any:
        torch.Tensor.any = _any_dims
