#!/usr/bin/env python3
"""Kernel Tuner's half of scripts/bench-vs-kernel-tuner.sh, and the neutral timing harness.

Subcommands (all print one JSON object on stdout):

  count    Kernel Tuner's count of the valid configurations of the translated space.
  subspace check that a manifest is a sub-space of a template (same source, rules, launch).
  tune     tune the kernel of a kf manifest with Kernel Tuner (OpenCL backend) over the
           manifest's space, with verification against NumPy, and report the best.
  time     re-time configurations with one neutral harness (pyopencl, 2-D launch, read-only
           inputs, profiling events, median of interleaved rounds).
  launch   the investigation of Kernel Tuner's slower timings: one configuration timed with a
           2-D and a 3-D launch, read-only and read-write input buffers, interleaved.

The manifest is translated whole, or not at all (exit 3, naming what is missing): its [params]
are the space; its [constraints] rules become Kernel Tuner restrictions, with the sizes and the
device facts substituted; its [launch] global range becomes Kernel Tuner's problem size and its
local range the block-size parameters (Kernel Tuner divides the one by the other, so the launch
is the manifest's). The device facts are kf's own (`--facts`: the `device_symbols` of a
`kf tune --json` summary), and `count`/`tune` stop (exit 4) when Kernel Tuner's count of valid
configurations differs from kf's (`--expect-valid`): both tools tune the same set.
"""
import argparse
import ast
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


class Untranslated(Exception):
    """A manifest expression names something this translation has no value for."""


# Above this many valid configurations (kf's count) the script does not ask Kernel Tuner to
# build the space: version 1.5 lists every configuration in memory (the 2.1 million of
# tuning-spaces/manifests/gemm_blocked_kt.toml took 1.7 GB and 4 s; 87 million ran out of 8 GB).
KT_SPACE_LIMIT = 5_000_000

# Functions manifest expressions may call (kf-manifest's expression language), as Python.
FUNCTIONS = {"max": max, "min": min}


def read_facts(path):
    """The device facts kf evaluated the manifest's constraints with: the `device_symbols`
    object of `kf tune --json` (kf_core::DeviceFacts::symbols of the characterised device), so
    that both tools judge a configuration's validity by the same numbers."""
    facts = json.loads(Path(path).read_text()).get("device_symbols")
    if not isinstance(facts, dict) or not facts:
        raise SystemExit(f"{path} has no device_symbols object (a kf tune --json summary has one)")
    return {str(k): int(v) for k, v in facts.items()}


def python_expression(text, known, params, where):
    """One manifest expression as a Python expression: sizes and device facts (`known`)
    substituted as numbers, `&&`/`||`/`!` written the Python way, `/` as C's integer division
    of non-negative operands. Every remaining name must be a tuning parameter or a function
    in FUNCTIONS; anything else stops the translation with its name (issue 62: a fact the
    translation lacks must not turn into Python's NameError mid-run, or be guessed)."""
    r = text.replace("&&", " and ").replace("||", " or ")
    r = re.sub(r"!(?!=)", " not ", r)
    for k, v in known.items():
        r = re.sub(rf"\b{k}\b", str(v), r)
    r = r.replace("/", "//")
    try:
        tree = ast.parse(r, mode="eval")
    except SyntaxError as e:
        raise Untranslated(f"{where}: {text!r} is not a translatable expression ({e.msg})")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in params and node.id not in FUNCTIONS:
            raise Untranslated(
                f"{where}: {text!r} uses {node.id!r}, which is neither a parameter nor a size "
                f"or device fact this translation knows ({', '.join(sorted(known))})")
    return r


class Space:
    """The manifest's space as Kernel Tuner takes it: the parameters, the [constraints] rules
    as restrictions, and the [launch] ranges as a problem size (the global range) divided by
    the local range, which is Kernel Tuner's default grid divisor."""

    def __init__(self, manifest, sizes, facts):
        self.params = {k: list(v) for k, v in manifest["params"].items()}
        known = {**sizes, **facts}
        self.restrictions = [
            python_expression(rule, known, self.params, f"[constraints] rule {i + 1}")
            for i, rule in enumerate(manifest.get("constraints", {}).get("rules", []))
        ]
        launch = manifest.get("launch", {})
        if "global" not in launch or "local" not in launch:
            raise Untranslated("the manifest has no [launch] global and local ranges")
        self.global_range = [python_expression(e, known, self.params, f"[launch] global[{i}]")
                             for i, e in enumerate(launch["global"])]
        self.local_names = []
        for i, e in enumerate(launch["local"]):
            if e not in self.params:
                raise Untranslated(f"[launch] local[{i}] = {e!r}: Kernel Tuner's block sizes "
                                   "must be parameters")
            self.local_names.append(e)
        self.max_threads = facts.get("max_work_group_size")
        if self.max_threads is None:
            raise Untranslated("the device facts lack max_work_group_size")

    def evaluate(self, expression, config):
        return int(eval(expression, {"__builtins__": {}, **FUNCTIONS}, dict(config)))

    def problem_size(self, config):
        """The global range of `config` (Kernel Tuner divides it by the block size)."""
        return tuple(self.evaluate(e, config) for e in self.global_range)

    def geometry(self, config, dims=2):
        g = self.problem_size(config)
        l = tuple(int(config[n]) for n in self.local_names)
        pad = (1,) * (dims - len(g))
        return g + pad, l + pad

    def valid_count(self):
        """How many configurations Kernel Tuner's own search space holds."""
        from kernel_tuner.searchspace import Searchspace

        return Searchspace(self.params, self.restrictions, self.max_threads,
                           block_size_names=self.local_names).size


def space_of(a, manifest):
    sizes = {"M": a.size, "N": a.size, "K": a.size}
    try:
        return Space(manifest, sizes, read_facts(a.facts))
    except Untranslated as e:
        print(f"kt_side_by_side: cannot translate the manifest for Kernel Tuner: {e}",
              file=sys.stderr)
        sys.exit(3)


def gemm_data(M, N, K, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.zeros((M, N), dtype=np.float32)
    return A, B, C, (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)


def checked_space(a, manifest):
    """The translated space, after checking that Kernel Tuner's count of valid configurations
    is kf's (`--expect-valid`, kf tune's `valid_configurations`): the two tools must tune the
    same set, or the comparison compares spaces instead of tuners."""
    if a.expect_valid is not None and a.expect_valid > KT_SPACE_LIMIT:
        print(f"kt_side_by_side: kf counts {a.expect_valid:,} valid configurations; Kernel Tuner "
              "1.5 builds its search space as a list in memory (about 0.8 KB a configuration) "
              f"and this script stops above {KT_SPACE_LIMIT:,}. Tune a sub-space manifest, such "
              "as tuning-spaces/manifests/gemm_blocked_kt.toml", file=sys.stderr)
        sys.exit(5)
    space = space_of(a, manifest)
    count = space.valid_count()
    print(f"valid configurations: kf {a.expect_valid}, Kernel Tuner {count}", file=sys.stderr)
    if a.expect_valid is not None and count != a.expect_valid:
        print(f"kt_side_by_side: the spaces differ: kf tunes {a.expect_valid} valid "
              f"configurations, Kernel Tuner {count} (a constraint or device fact is translated "
              "differently)", file=sys.stderr)
        sys.exit(4)
    return space, count


def cmd_subspace(a):
    """Checks that `--manifest` is a sub-space of `--template`: the same kernel source and
    entry, the same constraint rules and launch ranges, the same parameters, each with a
    subset of the template's values. A sub-space that drifted from its template would compare
    the tools on a kernel nobody ships."""
    sub, _ = load_manifest(a.manifest)
    full, _ = load_manifest(a.template)
    problems = []
    source = lambda path, m: (Path(path).parent / m["source"]).resolve()
    if source(a.manifest, sub) != source(a.template, full) or sub["entry"] != full["entry"]:
        problems.append("another kernel source or entry")
    for table in ("constraints", "launch"):
        if sub.get(table) != full.get(table):
            problems.append(f"its [{table}] differs from the template's")
    if list(sub["params"]) != list(full["params"]):
        problems.append(f"parameters {list(sub['params'])} are not the template's {list(full['params'])}")
    for name, values in sub["params"].items():
        extra = [v for v in values if v not in full["params"].get(name, [])]
        if extra:
            problems.append(f"{name} has values {extra} the template lacks")
    if problems:
        sys.exit(f"{a.manifest} is not a sub-space of {a.template}: " + "; ".join(problems))
    print(json.dumps({"subspace_of": a.template, "params": len(sub["params"])}))


def cmd_count(a):
    manifest, _ = load_manifest(a.manifest)
    _, count = checked_space(a, manifest)
    print(json.dumps({"valid_configurations": count}))


def cmd_tune(a):
    from kernel_tuner import tune_kernel

    manifest, source = load_manifest(a.manifest)
    space, count = checked_space(a, manifest)
    M = N = K = a.size
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
        space.problem_size,
        args,
        space.params,
        lang="OpenCL",
        block_size_names=space.local_names,
        restrictions=space.restrictions,
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
    keys = list(space.params)
    print(
        json.dumps(
            {
                "tool": "kernel_tuner",
                "strategy": a.strategy,
                "budget": a.budget,
                "valid_configurations": count,
                "evaluated": len(results),
                "correct": len(ok),
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


def profiling_setup(a):
    """The manifest, its translated space, the square sizes, and the first device with a
    profiling queue."""
    manifest, source = load_manifest(a.manifest)
    space = space_of(a, manifest)
    dev = cl.get_platforms()[0].get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return manifest, space, source, a.size, a.size, a.size, dev, ctx, q


def cmd_time(a):
    """Neutral re-timing: each configuration compiled once; rounds interleave them so that load
    changes hit all alike; median per configuration of all rounds' event times."""
    manifest, space, source, M, N, K, dev, ctx, q = profiling_setup(a)
    configs = json.loads(a.configs)
    args, dC, C, ref = gemm_setup(ctx, M, N, K, a.seed, read_write=False)
    kernels = {}
    for name, cfg in configs.items():
        k = build(ctx, dev, source, cfg, manifest["entry"])
        g, l = space.geometry(cfg, 2)
        k(q, g, l, *args).wait()
        cl.enqueue_copy(q, C, dC).wait()
        err = float(np.max(np.abs(C - ref)))
        kernels[name] = (k, g, l, err)
    # The harness checks what it times: a best configuration with a wrong result stops the
    # comparison (the tolerance is the one both tools verify with).
    wrong = {n: k[3] for n, k in kernels.items() if not k[3] <= 1e-2 * np.sqrt(K)}
    if wrong:
        sys.exit(f"kt_side_by_side time: wrong results (max abs error) {wrong}")
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
    manifest, space, source, M, N, K, dev, ctx, q = profiling_setup(a)
    cfg = json.loads(a.config)
    k_opts = build(ctx, dev, source, cfg, manifest["entry"])
    kt_text = "".join(f"#define {k} {v}\n" for k, v in cfg.items()) + "#define kernel_tuner 1\n" + source
    k_text = getattr(cl.Program(ctx, kt_text).build(devices=[dev]), manifest["entry"])
    variants = {}
    for rw in (False, True):
        args, *_ = gemm_setup(ctx, M, N, K, a.seed, read_write=rw)
        for dims in (2, 3):
            g, l = space.geometry(cfg, dims)
            variants[f"{dims}-D launch, {'read-write' if rw else 'read-only'} inputs"] = (k_opts, g, l, args)
        if rw:
            g, l = space.geometry(cfg, 3)
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

    def command(name, fn, help):
        c = sub.add_parser(name, help=help)
        c.add_argument("--manifest", required=True)
        c.add_argument("--size", type=int, default=512)
        c.add_argument("--facts", required=True,
                       help="kf tune --json output: its device_symbols are the device facts")
        c.set_defaults(fn=fn)
        return c

    for name, fn, help in (("count", cmd_count, "count Kernel Tuner's valid configurations"),
                           ("tune", cmd_tune, "tune with Kernel Tuner")):
        c = command(name, fn, help)
        c.add_argument("--expect-valid", type=int, default=None,
                       help="kf's count of valid configurations; stop (exit 4) if it differs")
        if name == "tune":
            c.add_argument("--budget", type=int, default=20)
            c.add_argument("--strategy", default="random_sample")
            c.add_argument("--seed", type=int, default=1)
            c.add_argument("--cache", default=None)
    sp = sub.add_parser("subspace", help="check that a manifest is a sub-space of a template")
    sp.add_argument("--manifest", required=True)
    sp.add_argument("--template", required=True)
    sp.set_defaults(fn=cmd_subspace)
    r = command("time", cmd_time, "re-time configurations with the neutral harness")
    r.add_argument("--configs", required=True, help="JSON object: name -> configuration")
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--reps", type=int, default=10)
    r.add_argument("--seed", type=int, default=7)
    l = command("launch", cmd_launch, "the launch investigation")
    l.add_argument("--config", required=True)
    l.add_argument("--rounds", type=int, default=15)
    l.add_argument("--reps", type=int, default=10)
    l.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
