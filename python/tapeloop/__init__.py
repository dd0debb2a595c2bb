"""tapeloop in-process: the Go engine as a shared library, driven through ctypes.

Each workload is compiled once into an object (Interp, Affinity, DRR, Wavelet);
each call replays the same compiled program over the same buffers, block by
block, so a loop over calls neither slows down nor grows in memory. Inputs that
are C-contiguous arrays of the compiled dtype pass by pointer; anything with
__array_interface__, the buffer protocol or a CPU __dlpack__ is accepted, and
converted once where it is not such an array. Outputs are NumPy arrays, or the
caller's ``out=``. Errors raise tapeloop.Error with the message the CLI prints
for the same mistake. Calls release the GIL; Ctrl-C stops a long call from the
main thread within a second (KeyboardInterrupt) and leaves the object usable.
"""
from ._lib import Error, build, release, version
from .shards import Shard, merge
from .affinity import Affinity, affinity
from .drr import DRR, drr
from .interp import Interp, interp
from .wavelet import Wavelet, wavelet

__all__ = ["Error", "Interp", "interp", "Affinity", "affinity", "DRR", "drr", "Wavelet", "wavelet", "Shard", "merge",
           "version", "release", "build"]


def __getattr__(name):
    # __version__ comes from the library (tl_release), so that it cannot
    # disagree with the engine it describes; it is read at its first use,
    # as the library is loaded, not at import.
    if name == "__version__":
        v = release()
        globals()["__version__"] = v
        return v
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
