# The reference library at a task's size, for the search's report: NumPy's BLAS for gemm,
# NumPy's vectorised row softmax for softmax. Prints one JSON object on stdout.
# Arguments: task name, sizes (JSON object), seconds of timing at least.
# Exit 4: NumPy is missing; exit 3: no reference for this task.
import json
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    sys.exit(4)

task, sizes, min_seconds = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])
rng = np.random.default_rng(0)


def openblas():
    """The loaded OpenBLAS's core kernel, configuration and thread count, when it says."""
    import ctypes
    import glob
    import os

    here = os.path.dirname(np.__file__)
    found = glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas*"))
    found += glob.glob(os.path.join(here, ".libs", "*openblas*"))
    for path in found:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        info = {}
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                try:
                    core = getattr(lib, prefix + "get_corename" + suffix)
                    config = getattr(lib, prefix + "get_config" + suffix)
                    threads = getattr(lib, prefix + "get_num_threads" + suffix)
                except AttributeError:
                    continue
                core.restype = ctypes.c_char_p
                config.restype = ctypes.c_char_p
                threads.restype = ctypes.c_int
                info["kernel"] = core().decode()
                info["config"] = config().decode().strip()
                info["threads"] = int(threads())
                return info
    return {}


def blas_name():
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return ("%s %s" % (deps.get("name", "blas"), deps.get("version", ""))).strip()
    except Exception:  # an older NumPy without mode="dicts"
        return "blas"


if task == "gemm":
    m, n, k = sizes["M"], sizes["N"], sizes["K"]
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), dtype=np.float32)

    def run():
        np.matmul(a, b, out=c)

    library = blas_name()
    info = openblas()
elif task == "softmax":
    rows, cols = sizes["ROWS"], sizes["COLS"]
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    e = np.empty_like(x)
    s = np.empty((rows, 1), dtype=np.float32)

    def run():
        np.subtract(x, x.max(axis=1, keepdims=True), out=e)
        np.exp(e, out=e)
        np.sum(e, axis=1, keepdims=True, out=s)
        np.divide(e, s, out=e)

    library = "numpy row softmax"
    info = {}
else:
    sys.exit(3)

run()
samples = []
start = time.perf_counter()
while len(samples) < 5 or time.perf_counter() - start < min_seconds:
    t0 = time.perf_counter()
    run()
    samples.append(time.perf_counter() - t0)
    if len(samples) >= 10000:
        break
samples.sort()
out = {
    "library": library,
    "numpy": np.__version__,
    "median_s": samples[len(samples) // 2],
    "trials": len(samples),
    # Which OpenBLAS pins the measurement saw (none, when run as the search runs it).
    "pins_seen": sorted(k for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ),
}
out.update(info)
print(json.dumps(out))
