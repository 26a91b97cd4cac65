import math
import threading

import numpy as np
import pyopencl as cl

__all__ = [
    "KernelError",
    "BadCall",
    "NoConfiguration",
    "ConstraintFailed",
    "Kernels",
    "device_facts",
]


class KernelError(Exception):
    """Every error of this module."""


class BadCall(KernelError):
    """Sizes or arrays that do not fit the task's signature."""


class ConstraintFailed(KernelError):
    """A configuration cannot run at the caller's sizes on the caller's device."""


class NoConfiguration(KernelError):
    """No configuration of the table can run at the caller's sizes on the caller's device."""


# kf-manifest's expression semantics: integer division and remainder truncate towards zero
# (C), `^` is a float power, floor/ceil/round give floats.
def _div(a, b):
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _mod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a - b * _div(a, b)
    return math.fmod(a, b)


def _pow(a, b):
    return float(a) ** float(b)


def _min(*xs):
    return min(xs)


def _max(*xs):
    return max(xs)


def _if(c, a, b):
    return a if c else b


def _floor(x):
    return float(math.floor(x))


def _ceil(x):
    return float(math.ceil(x))


def _round(x):
    # Rust's f64::round: halves away from zero.
    return float(math.floor(abs(x) + 0.5)) * (1.0 if x >= 0 else -1.0)


# `CL_DEVICE_SUB_GROUP_SIZES_INTEL` (cl_intel_required_subgroup_size), as kf-backend-opencl
# reads it. pyopencl does not know this query, so it goes to clGetDeviceInfo through the OpenCL
# library pyopencl itself loaded (any ICD loader dispatches a device handle to its driver).
_SUB_GROUP_SIZES_INTEL = 0x4108


def _opencl_library():
    import ctypes
    import ctypes.util

    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "libOpenCL" in path and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    found = ctypes.util.find_library("OpenCL")
    if found:
        paths.append(found)
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _sub_group_size(device):
    """The largest of the device's sub-group sizes; 1 when it reports none (as kf-backend-opencl)."""
    import ctypes

    lib = _opencl_library()
    if lib is None:
        return 1
    get_info = lib.clGetDeviceInfo
    get_info.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p,
                         ctypes.POINTER(ctypes.c_size_t)]
    get_info.restype = ctypes.c_int32
    size = ctypes.c_size_t(0)
    handle = ctypes.c_void_p(device.int_ptr)
    if get_info(handle, _SUB_GROUP_SIZES_INTEL, 0, None, ctypes.byref(size)) != 0 or not size.value:
        return 1
    count = size.value // ctypes.sizeof(ctypes.c_size_t)
    sizes = (ctypes.c_size_t * count)()
    if get_info(handle, _SUB_GROUP_SIZES_INTEL, size.value, sizes, None) != 0:
        return 1
    return int(max(sizes)) if count else 1


def _cache_size(text):
    """A sysfs cache size (`48K`, `2M`, `1G` or plain bytes) in bytes, as kf_core parses it."""
    text = text.strip()
    shift = {"K": 10, "k": 10, "M": 20, "m": 20, "G": 30, "g": 30}.get(text[-1:], 0)
    number = text[:-1] if shift else text
    return int(number) << shift if number.isdigit() else None


def _cpu_caches(root="/sys/devices/system/cpu/cpu0/cache"):
    """CPU 0's data and unified caches by level (kf_core::CpuCaches::from_sysfs)."""
    import os

    levels = {1: 0, 2: 0, 3: 0}
    try:
        entries = os.listdir(root)
    except OSError:
        return levels
    for entry in entries:
        if not entry.startswith("index"):
            continue

        def read(name):
            try:
                with open(os.path.join(root, entry, name)) as f:
                    return f.read()
            except OSError:
                return None

        if (read("type") or "").strip() == "Instruction":
            continue
        level, size = read("level"), read("size")
        level = int(level.strip()) if level and level.strip().isdigit() else None
        size = _cache_size(size) if size else None
        if level in levels and size is not None:
            levels[level] = max(levels[level], size)
    return levels


def _host_max_mhz():
    """The host's clock when the runtime reports none (kf-backend-common's host::max_mhz)."""
    cpufreq = None
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as f:
            cpufreq = int(f.read().strip()) // 1000
    except (OSError, ValueError):
        pass
    cpuinfo = None
    try:
        with open("/proc/cpuinfo") as f:
            values = [float(line.split(":", 1)[1]) for line in f if line.startswith("cpu MHz")]
        cpuinfo = int(round(max(values))) if values else None
    except (OSError, ValueError):
        pass
    if cpufreq is not None and cpuinfo is not None:
        return max(cpufreq, cpuinfo)
    value = cpufreq if cpufreq is not None else cpuinfo
    return value if value else 0


def device_facts(device):
    """The device facts by the names manifest expressions use (kf_core::DeviceFacts::symbols),
    found as kf-backend-opencl finds them (a CPU device's cache levels from sysfs, its clock
    from the host when the runtime reports none)."""
    items = list(device.max_work_item_sizes) + [1, 1, 1]
    is_cpu = bool(device.type & cl.device_type.CPU)
    is_gpu = bool(device.type & cl.device_type.GPU)
    global_cache = int(device.global_mem_cache_size)
    caches = _cpu_caches() if is_cpu else {1: 0, 2: 0, 3: 0}
    if is_gpu and caches[2] == 0:
        caches[2] = global_cache
    clock = int(device.max_clock_frequency)
    if clock == 0 and is_cpu:
        clock = _host_max_mhz()
    return {
        "compute_units": int(device.max_compute_units),
        "max_work_group_size": int(device.max_work_group_size),
        "local_mem_bytes": int(device.local_mem_size),
        "local_mem_size": int(device.local_mem_size),
        "global_mem_bytes": int(device.global_mem_size),
        "max_clock_mhz": clock,
        "preferred_vector_width": int(device.preferred_vector_width_float),
        "sub_group_size": _sub_group_size(device),
        "global_mem_cache_bytes": global_cache,
        "l1_cache_bytes": caches[1],
        "l2_cache_bytes": caches[2],
        "l3_cache_bytes": caches[3],
        "max_work_item_size_0": int(items[0]),
        "max_work_item_size_1": int(items[1]),
        "max_work_item_size_2": int(items[2]),
    }


def _as_int(value, what):
    if isinstance(value, bool):
        raise ConstraintFailed(f"{what} is a boolean, not a size")
    if isinstance(value, float):
        if not value.is_integer():
            raise ConstraintFailed(f"{what} = {value} is not an integer")
        value = int(value)
    if value <= 0:
        raise ConstraintFailed(f"{what} = {value} is not positive")
    return value


class _Configuration:
    def __init__(self, name, run, device, driver, tuned_sizes, params, source, entry,
                 options, gflops, constraints, global_size, local_size):
        self.name = name
        self.run = run
        self.device = device
        self.driver = driver
        self.tuned_sizes = tuned_sizes
        self.params = params
        self.source = source
        self.entry = entry
        self.options = options
        self.gflops = gflops
        self.constraints = constraints
        self.global_size = global_size
        self.local_size = local_size

    def launch(self, symbols):
        """The launch geometry at `symbols` (sizes and device facts); raises ConstraintFailed
        naming the first rule that does not hold."""
        try:
            for text, rule in self.constraints:
                if not rule(symbols):
                    raise ConstraintFailed(f"{self.name}: the constraint `{text}` does not hold")
            glob = tuple(_as_int(f(symbols), f"{self.name}: global `{t}`")
                         for t, f in self.global_size)
            loc = None
            if self.local_size is not None:
                loc = tuple(_as_int(f(symbols), f"{self.name}: local `{t}`")
                            for t, f in self.local_size)
        except ZeroDivisionError:
            raise ConstraintFailed(f"{self.name}: an expression divides by zero") from None
        except KeyError as e:
            raise ConstraintFailed(f"{self.name}: unknown name {e} in an expression") from None
        if not 1 <= len(glob) <= 3:
            raise ConstraintFailed(f"{self.name}: {len(glob)} launch dimensions")
        if loc is not None:
            if len(loc) != len(glob) or any(g % l for g, l in zip(glob, loc)):
                raise ConstraintFailed(
                    f"{self.name}: the work-group {loc} does not divide the global size {glob}")
        return glob, loc


def _distance(caller, tuned):
    total = 0.0
    for name, value in caller.items():
        if name not in tuned:
            continue
        t = tuned[name]
        if value <= 0 or t <= 0:
            return math.inf
        total += abs(math.log(value / t))
    return total


def _device_tier(config, device_name, driver):
    if config.device.strip() != device_name.strip():
        return 2
    if config.driver is not None and config.driver.strip() != driver.strip():
        return 1
    return 0


class _Task:
    def __init__(self, name, sizes, scalars, buffers, args, configurations):
        self.name = name
        self.sizes = sizes
        self.scalars = scalars  # (name, numpy dtype)
        # (name, numpy dtype, length text, length fn, access: "in", "out" or "inout")
        self.buffers = buffers
        self.args = args  # ("size", name), ("scalar", index) or ("buffer", index)
        self.configurations = configurations

    def scalar_values(self, values):
        if len(values) != len(self.scalars):
            raise BadCall(f"{self.name}: {len(values)} scalars given, the task has "
                          f"{len(self.scalars)} ({', '.join(s[0] for s in self.scalars)})")
        out = []
        for (name, dtype), v in zip(self.scalars, values):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise BadCall(f"{self.name}: scalar {name} = {v!r} is not a number")
            if dtype == np.int32:
                if float(v) != int(v) or not -2**31 <= int(v) < 2**31:
                    raise BadCall(f"{self.name}: scalar {name} = {v!r} is not an OpenCL int")
            out.append(dtype(v))
        return out

    def named_sizes(self, values):
        if len(values) != len(self.sizes):
            raise BadCall(f"{self.name}: {len(values)} sizes given, the task has "
                          f"{len(self.sizes)} ({', '.join(self.sizes)})")
        out = {}
        for name, v in zip(self.sizes, values):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise BadCall(f"{self.name}: {name} = {v!r} is not an integer")
            v = int(v)
            if v <= 0 or v > 2**31 - 1:
                raise BadCall(f"{self.name}: {name} = {v} is not a positive OpenCL int")
            out[name] = v
        return out

    def choose(self, facts, device_name, driver, sizes):
        """The index of the configuration that serves `sizes` (kf_export::dispatch::choose)."""
        symbols = dict(facts, **sizes)
        best = None
        reasons = []
        for i, c in enumerate(self.configurations):
            try:
                c.launch(symbols)
            except ConstraintFailed as e:
                reasons.append(str(e))
                continue
            tier = _device_tier(c, device_name, driver)
            dist = _distance(sizes, c.tuned_sizes)
            volume = sum(math.log(max(v, 1)) for v in c.tuned_sizes.values())
            if best is None:
                better = True
            else:
                _, bt, bd, bv = best
                tol = 1e-9 * (1.0 + abs(bd))
                better = tier < bt or (tier == bt and (dist < bd - tol
                                                      or (abs(dist - bd) <= tol and volume > bv)))
            if better:
                best = (i, tier, dist, volume)
        if best is None:
            text = ",".join(f"{k}={v}" for k, v in sizes.items())
            raise NoConfiguration(f"{self.name}: no configuration runs at {text} on {device_name}: "
                                  + "; ".join(reasons))
        return best[0]


class Kernels:
    """Compiled kernels for one OpenCL command queue (default: `cl.create_some_context`,
    which honours PYOPENCL_CTX). Programs are built on first use and kept."""

    def __init__(self, queue=None):
        if queue is None:
            # The context is kept: a queue alone does not keep pyopencl's context object alive.
            self.context = cl.create_some_context(interactive=False)
            queue = cl.CommandQueue(self.context)
        else:
            self.context = queue.context
        self.queue = queue
        self.device = queue.device
        self.facts = device_facts(self.device)
        self._programs = {}
        self._lock = threading.Lock()

    def __repr__(self):
        return f"Kernels(device={self.device.name.strip()!r}, compiled={len(self._programs)})"

    def _kernel(self, config):
        # Called with self._lock held: a kernel object's arguments are per object, so one call
        # at a time sets and launches it.
        kernel = self._programs.get(config.name)
        if kernel is None:
            try:
                program = cl.Program(self.context, config.source).build(
                    options=config.options, devices=[self.device])
            except cl.Error as e:
                raise KernelError(f"{config.name}: the build failed: {e}") from e
            kernel = cl.Kernel(program, config.entry)
            self._programs[config.name] = kernel
        return kernel

    def choose(self, task, sizes):
        named = task.named_sizes(sizes)
        return task.choose(self.facts, self.device.name, self.device.driver_version, named)

    def check(self, task, index, sizes):
        """Raises ConstraintFailed when configuration `index` cannot run at `sizes` here."""
        named = task.named_sizes(sizes)
        task.configurations[index].launch(dict(self.facts, **named))

    def call(self, task, index, sizes, scalars, arrays):
        named = task.named_sizes(sizes)
        scalar_values = task.scalar_values(scalars)
        inputs = [b for b in task.buffers if b[4] != "out"]
        if len(arrays) != len(inputs):
            raise BadCall(f"{task.name}: {len(arrays)} arrays given, the task reads "
                          f"{len(inputs)} ({', '.join(b[0] for b in inputs)})")
        # The arrays are checked first: a wrong length is the caller's error at any sizes.
        host = []
        given = iter(arrays)
        for name, dtype, len_text, length, access in task.buffers:
            n = length(named)
            if access == "out":
                host.append(np.empty(n, dtype=dtype))
                continue
            data = np.ascontiguousarray(next(given), dtype=dtype).reshape(-1)
            if access == "inout":
                # Written in place on the device; the caller's array stays as it was.
                data = data.copy()
            if data.size != n:
                text = ",".join(f"{k}={v}" for k, v in named.items())
                raise BadCall(f"{task.name}: {name} has {data.size} elements, "
                              f"{len_text} = {n} at {text}")
            host.append(data)
        if index is None:
            index = task.choose(self.facts, self.device.name, self.device.driver_version, named)
        if not 0 <= index < len(task.configurations):
            raise BadCall(f"{task.name}: no configuration {index} "
                          f"(the table has {len(task.configurations)})")
        config = task.configurations[index]
        glob, loc = config.launch(dict(self.facts, **named))
        mf = cl.mem_flags
        device_buffers, outputs = [], []
        for (name, dtype, len_text, length, access), data in zip(task.buffers, host):
            if access == "out":
                buf = cl.Buffer(self.context, mf.WRITE_ONLY, max(data.nbytes, 1))
                outputs.append((data, buf))
            elif access == "inout":
                if data.size:
                    buf = cl.Buffer(self.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=data)
                else:
                    buf = cl.Buffer(self.context, mf.READ_WRITE, 1)
                outputs.append((data, buf))
            elif data.size:
                buf = cl.Buffer(self.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=data)
            else:
                buf = cl.Buffer(self.context, mf.READ_ONLY, 1)
            device_buffers.append(buf)
        with self._lock:
            kernel = self._kernel(config)
            for position, (kind, what) in enumerate(task.args):
                if kind == "size":
                    kernel.set_arg(position, np.int32(named[what]))
                elif kind == "scalar":
                    kernel.set_arg(position, scalar_values[what])
                else:
                    kernel.set_arg(position, device_buffers[what])
            cl.enqueue_nd_range_kernel(self.queue, kernel, glob, loc)
            for data, buf in outputs:
                cl.enqueue_copy(self.queue, data, buf)
            self.queue.finish()
        results = tuple(data for data, _ in outputs)
        return (results[0] if len(results) == 1 else results), index


_default_kernels = None
_default_lock = threading.Lock()


def _kernels(kernels):
    global _default_kernels
    if kernels is not None:
        return kernels
    with _default_lock:
        if _default_kernels is None:
            _default_kernels = Kernels()
        return _default_kernels
