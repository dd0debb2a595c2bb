"""What this machine's CPU can do, and what a peer process actually runs on.

Two halves, used by bench/compare.py and by the peer scripts next to this
file (which import it as `peerinfo`):

- cpu(): the CPU's model, its usable cores and its vector features, read
  from /proc/cpuinfo, and the OpenBLAS kernel family ("core") those features
  allow: SkylakeX with AVX-512 (avx512f, avx512bw, avx512vl and avx512dq),
  Haswell with AVX2 and FMA, otherwise none (OpenBLAS's own choice stands;
  so on arm64, whose /proc/cpuinfo lists "Features", not "flags").
  Debian's OpenBLAS 0.3.21 picks "Prescott" (SSE3 kernels) on AVX-512 CPUs
  it does not know, several times slower; OPENBLAS_CORETYPE, read when the
  library loads, overrides that choice.
- openblas(): the OpenBLAS loaded into the calling process, asked directly
  (openblas_get_corename, openblas_get_config, openblas_get_num_threads
  through ctypes, on the library file this process has mapped), so a peer
  reports the kernels it really ran rather than the ones it was asked for.
"""
import ctypes
import os


def cores():
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu():
    """{'model', 'cores', 'flags', 'openblas_core'} of this machine."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:  # x86, arm64
                    flags = set(value.split())
    except OSError:
        pass
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        core = "SkylakeX"
    elif {"avx2", "fma"} <= flags:
        core = "Haswell"
    else:
        core = None
    return {"model": model, "cores": cores(), "flags": flags, "openblas_core": core}


def openblas():
    """The OpenBLAS mapped into this process, or None: {'library':
    'OpenBLAS 0.3.21', 'core': 'SkylakeX', 'threads': 2, 'path': …}.
    Call it after the library is loaded (after importing NumPy or FAISS)."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if ".so" in line and "/" in line})
    except OSError:
        return None
    # Prefer the library file itself over the libblas.so.3 alternative link.
    paths.sort(key=lambda p: "openblas" not in os.path.basename(p))
    for path in paths:
        if "blas" not in path and "lapack" not in path:
            continue
        try:
            lib = ctypes.CDLL(path)  # the copy already loaded, not a second one
            corename, config = lib.openblas_get_corename, lib.openblas_get_config
        except (OSError, AttributeError):
            continue
        corename.restype = config.restype = ctypes.c_char_p
        words = config().decode().split()  # "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH …"
        return {"library": " ".join(words[:2]), "core": corename().decode(),
                "threads": int(lib.openblas_get_num_threads()), "path": path}
    return None


def describe_blas(info):
    """One phrase for a table: 'OpenBLAS 0.3.21 SkylakeX, 2 threads'."""
    if not info:
        return "no OpenBLAS loaded"
    return f"{info['library']} {info['core']}, {info['threads']} thread{'s' if info['threads'] != 1 else ''}"


# OpenBLAS core types by the kernels they run: an AVX-512 CPU runs
# best on the first family, an AVX2 one on the second.
_AVX512_CORES = {"skylakex", "cooperlake", "sapphirerapids"}
_AVX2_CORES = _AVX512_CORES | {"haswell", "zen"}


def best_core(env):
    """(core, source): the OPENBLAS_CORETYPE a peer runs with. One set in env
    is kept unless it names weaker kernels than this CPU runs (Haswell on
    an AVX-512 CPU, say, as some machines set for every job): a peer is
    compared at its best, so the CPU's own family replaces it, and the
    source says so."""
    found = cpu()["openblas_core"]
    given = env.get("OPENBLAS_CORETYPE")
    if not given:
        return found, "/proc/cpuinfo"
    strong = {"SkylakeX": _AVX512_CORES, "Haswell": _AVX2_CORES}.get(found)
    if strong and given.lower() not in strong:
        return found, f"/proc/cpuinfo, over the environment's {given}"
    return given, "the environment"


def use_best_core():
    """Sets OPENBLAS_CORETYPE (best_core) and the thread counts (to the
    usable cores) where the environment does not already set them: a peer
    run on its own, as `make bench` runs them, then loads OpenBLAS at its
    best too. Call it before importing NumPy or FAISS."""
    core, _ = best_core(os.environ)
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, str(cpu()["cores"]))