#!/usr/bin/env python3
"""Kernel Tuner's half of scripts/bench-vs-kernel-tuner.sh, and the neutral timing harness.

Subcommands (all print one JSON object on stdout):

  tune     tune the kernel of a kf manifest with Kernel Tuner (OpenCL backend) over the
           manifest's space, with verification against NumPy, and report the best.
  time     re-time configurations with one neutral harness (pyopencl, 2-D launch, read-only
           inputs, profiling events, median of interleaved rounds).
  launch   the investigation of Kernel Tuner's slower timings: one configuration timed with a
           2-D and a 3-D launch, read-only and read-write input buffers, interleaved.

The manifest's [params] are the space; its [constraints] rules become Kernel Tuner
restrictions (the device symbols max_work_group_size, local_mem_bytes, sub_group_size are
filled in from the device). The launch geometry is the one of kf-mutate's GEMM templates:
global = (N / (TN*VW), M / TM), local = (WG0, WG1).
"""
import argparse
import json
import random
import re
import statistics
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pyopencl as cl


def load_manifest(path):
    path = Path(path)
    m = tomllib.loads(path.read_text())
    source = (path.parent / m["source"]).read_text()
    return m, source


def device_symbols(dev):
    return {
        "max_work_group_size": dev.max_work_group_size,
        "local_mem_bytes": dev.local_mem_size,
        # The Intel CPU runtime's widest sub-group.
        "sub_group_size": 16,
    }


def restrictions(manifest, sizes, symbols):
    """The manifest's rules as Python expressions over the parameters (sizes and device facts
    substituted as numbers; && || ! written the Python way)."""
    out = []
    for rule in manifest.get("constraints", {}).get("rules", []):
        r = rule.replace("&&", " and ").replace("||", " or ")
        r = re.sub(r"!(?!=)", " not ", r)
        for k, v in {**sizes, **symbols}.items():
            r = re.sub(rf"\b{k}\b", str(v), r)
        # Integer division as in C.
        r = r.replace("/", "//")
        out.append(r)
    return out


def gemm_data(M, N, K, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.zeros((M, N), dtype=np.float32)
    return A, B, C, (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)


def cmd_tune(a):
    from kernel_tuner import tune_kernel

    manifest, source = load_manifest(a.manifest)
    M = N = K = a.size
    ctx_dev = cl.get_platforms()[0].get_devices()[0]
    sizes = {"M": M, "N": N, "K": K}
    tune_params = {k: list(v) for k, v in manifest["params"].items()}
    A, B, C, ref = gemm_data(M, N, K, a.seed)
    args = [np.int32(M), np.int32(N), np.int32(K), A, B, C]
    answer = [None, None, None, None, None, ref]
    # Kernel Tuner's strategies draw from Python's and NumPy's global generators.
    random.seed(a.seed)
    np.random.seed(a.seed)
    t0 = time.perf_counter()
    results, env = tune_kernel(
        manifest["entry"],
        source,
        (N, M),
        args,
        tune_params,
        lang="OpenCL",
        block_size_names=["WG0", "WG1"],
        grid_div_x=["WG0", "TN", "VW"],
        grid_div_y=["WG1", "TM"],
        restrictions=restrictions(manifest, sizes, device_symbols(ctx_dev)),
        answer=answer,
        atol=1e-2 * np.sqrt(K),
        strategy=a.strategy,
        strategy_options={"max_fevals": a.budget},
        cache=a.cache,
        simulation_mode=False,
        verbose=False,
        quiet=True,
        iterations=7,
    )
    wall = time.perf_counter() - t0
    ok = [r for r in results if isinstance(r.get("time"), float)]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    keys = list(tune_params)
    print(
        json.dumps(
            {
                "tool": "kernel_tuner",
                "strategy": a.strategy,
                "budget": a.budget,
                "evaluated": len(results),
                "valid": len(ok),
                "wall_s": wall,
                "best_config": {k: best[k] for k in keys} if best else None,
                "best_time_ms": best["time"] if best else None,
                "gflops_own": 2.0 * M * N * K / (best["time"] * 1e-3) / 1e9 if best else None,
            }
        )
    )


def build(ctx, dev, source, config, entry):
    opts = " ".join(f"-D{k}={v}" for k, v in config.items())
    prg = cl.Program(ctx, source).build(options=opts, devices=[dev])
    return getattr(prg, entry)


def timed(queue, kern, gsize, lsize, args, reps, poll=False):
    """Event times (ms) of `reps` launches. `poll` waits the way Kernel Tuner 1.5's
    benchmark loop does (core.py benchmark_default): a Python loop that asks the event's status
    and sleeps 1 µs until the kernel is done, instead of blocking in clWaitForEvents."""
    times = []
    for _ in range(reps):
        ev = kern(queue, gsize, lsize, *args)
        if poll:
            while ev.get_info(cl.event_info.COMMAND_EXECUTION_STATUS) != 0:
                time.sleep(1e-6)
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-6)
    return times


def gemm_setup(ctx, M, N, K, seed, read_write):
    A, B, C, ref = gemm_data(M, N, K, seed)
    mf = cl.mem_flags
    ro = mf.READ_WRITE if read_write else mf.READ_ONLY
    dA = cl.Buffer(ctx, ro | mf.COPY_HOST_PTR, hostbuf=A)
    dB = cl.Buffer(ctx, ro | mf.COPY_HOST_PTR, hostbuf=B)
    dC = cl.Buffer(ctx, mf.READ_WRITE, C.nbytes)
    return [np.int32(M), np.int32(N), np.int32(K), dA, dB, dC], dC, C, ref


def geometry(config, M, N, dims):
    g = (N // (config["TN"] * config["VW"]), M // config["TM"])
    l = (config["WG0"], config["WG1"])
    if dims == 3:
        return g + (1,), l + (1,)
    return g, l


def profiling_setup(a):
    """The manifest, the square sizes, and the first device with a profiling queue."""
    manifest, source = load_manifest(a.manifest)
    dev = cl.get_platforms()[0].get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return manifest, source, a.size, a.size, a.size, dev, ctx, q


def cmd_time(a):
    """Neutral re-timing: each configuration compiled once; rounds interleave them so that load
    changes hit all alike; median per configuration of all rounds' event times."""
    manifest, source, M, N, K, dev, ctx, q = profiling_setup(a)
    configs = json.loads(a.configs)
    args, dC, C, ref = gemm_setup(ctx, M, N, K, a.seed, read_write=False)
    kernels = {}
    for name, cfg in configs.items():
        k = build(ctx, dev, source, cfg, manifest["entry"])
        g, l = geometry(cfg, M, N, 2)
        k(q, g, l, *args).wait()
        cl.enqueue_copy(q, C, dC).wait()
        err = float(np.max(np.abs(C - ref)))
        kernels[name] = (k, g, l, err)
    samples = {n: [] for n in configs}
    for _ in range(a.rounds):
        for n, (k, g, l, _) in kernels.items():
            samples[n] += timed(q, k, g, l, args, a.reps)
    out = {}
    for n, s in samples.items():
        med = statistics.median(s)
        out[n] = {
            "median_ms": med,
            "gflops": 2.0 * M * N * K / (med * 1e-3) / 1e9,
            "max_abs_error": kernels[n][3],
            "samples": len(s),
        }
    print(json.dumps(out))


def cmd_launch(a):
    """One configuration, four ways (2-D/3-D launch × read-only/read-write inputs), the
    Kernel Tuner way of building it (#defines in the source text instead of -D options), and
    the Kernel Tuner way of waiting for it (a polling loop on the host, which on a CPU device
    competes with the kernel for the cores); interleaved rounds, median event times."""
    manifest, source, M, N, K, dev, ctx, q = profiling_setup(a)
    cfg = json.loads(a.config)
    k_opts = build(ctx, dev, source, cfg, manifest["entry"])
    kt_text = "".join(f"#define {k} {v}\n" for k, v in cfg.items()) + "#define kernel_tuner 1\n" + source
    k_text = getattr(cl.Program(ctx, kt_text).build(devices=[dev]), manifest["entry"])
    variants = {}
    for rw in (False, True):
        args, *_ = gemm_setup(ctx, M, N, K, a.seed, read_write=rw)
        for dims in (2, 3):
            g, l = geometry(cfg, M, N, dims)
            variants[f"{dims}-D launch, {'read-write' if rw else 'read-only'} inputs"] = (k_opts, g, l, args)
        if rw:
            g, l = geometry(cfg, M, N, 3)
            variants["3-D, read-write, #defines in the text (Kernel Tuner's way)"] = (k_text, g, l, args)
            variants["3-D, read-write, #defines, polled on the host (all of Kernel Tuner's way)"] = (
                k_text, g, l, args)
    for k, g, l, args in variants.values():
        k(q, g, l, *args).wait()
    samples = {n: [] for n in variants}
    for _ in range(a.rounds):
        for n, (k, g, l, args) in variants.items():
            samples[n] += timed(q, k, g, l, args, a.reps, poll="polled" in n)
    print(json.dumps({n: statistics.median(s) for n, s in samples.items()}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tune")
    t.add_argument("--manifest", required=True)
    t.add_argument("--size", type=int, default=512)
    t.add_argument("--budget", type=int, default=20)
    t.add_argument("--strategy", default="random_sample")
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--cache", default=None)
    t.set_defaults(fn=cmd_tune)
    r = sub.add_parser("time")
    r.add_argument("--manifest", required=True)
    r.add_argument("--size", type=int, default=512)
    r.add_argument("--configs", required=True, help="JSON object: name -> configuration")
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--reps", type=int, default=10)
    r.add_argument("--seed", type=int, default=7)
    r.set_defaults(fn=cmd_time)
    l = sub.add_parser("launch")
    l.add_argument("--manifest", required=True)
    l.add_argument("--size", type=int, default=512)
    l.add_argument("--config", required=True)
    l.add_argument("--rounds", type=int, default=15)
    l.add_argument("--reps", type=int, default=10)
    l.add_argument("--seed", type=int, default=7)
    l.set_defaults(fn=cmd_launch)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
