#!/usr/bin/env python3
"""Kernel Tuner's strategies on the landscape benchmark's caches, in simulation mode.

Half of scripts/bench-landscapes-vs-kt.sh: for every Kernel Tuner cache given (the synthetic
instances `landscapes --write-kt DIR` writes, one file per kind and seed, named KIND_SEED.json;
and measured caches, the same landscape for every seed), every strategy, budget and seed, run
Kernel Tuner 1.5's `tune_kernel` in simulation mode (it reads the times from the cache and runs
nothing) with `max_fevals` = the budget, and score the run as kf-tune's landscape benchmark
does: optimum time / best time found (0 when nothing valid was found). Budgets are fractions of
the landscape's valid configurations, rounded down as kf-tune's benchmark does (at least 2).

Kernel Tuner draws its random numbers from Python's `random` and NumPy's global generators;
both are seeded with the benchmark seed before each run, so a run is reproducible.

Prints one JSON object: {"cells": [{"landscape", "budget", "strategy", "scores": [...]}, ...]}.

`kt_landscapes.py compare KF_JSON KT_JSON` prints, per cell, kf-tune's default (the landscapes
example's `--json`) against Kernel Tuner's best strategy for that cell, whether the default is
behind by more than noise (the difference of the means below minus two standard errors), and
every strategy's mean over all cells.
"""
import argparse
import gzip
import io
import json
import math
import random
import re
import signal
import sys
import tempfile
import time
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
from kernel_tuner import tune_kernel
from kernel_tuner.runners.simulation import SimulationRunner

# Some Kernel Tuner strategies can loop forever once every configuration they would propose
# has been seen (revisits cost no evaluation), e.g. greedy_ils on a 158-configuration space.
# A run that asks this many times in a row without reaching a new configuration, or that runs
# longer than RUN_SECONDS, is stopped and scored by what it had evaluated.
STALL_ASKS = 20000
RUN_SECONDS = 900

# Every result the simulation runner returned in the current run (see run_one), the distinct
# configurations among them, and the asks since the last new one.
_SEEN = []
_DISTINCT = set()
_SINCE_NEW = [0]
_ORIGINAL_RUN = SimulationRunner.run


class RunTimeout(BaseException):
    """Stops a stalled or overlong run (from the stall check below or the alarm); a
    BaseException so that no `except Exception` inside Kernel Tuner swallows it."""


def _recording_run(self, parameter_space, tuning_options):
    results = _ORIGINAL_RUN(self, parameter_space, tuning_options)
    _SEEN.extend(results)
    before = len(_DISTINCT)
    keys = list(tuning_options.tune_params)
    _DISTINCT.update(tuple(r.get(k) for k in keys) for r in results if r)
    _SINCE_NEW[0] = 0 if len(_DISTINCT) > before else _SINCE_NEW[0] + 1
    if _SINCE_NEW[0] >= STALL_ASKS:
        raise RunTimeout()
    return results


SimulationRunner.run = _recording_run


def _alarm(_signum, _frame):
    raise RunTimeout()


signal.signal(signal.SIGALRM, _alarm)


def read_cache(path):
    raw = Path(path).read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    text = raw.decode().strip()
    # Kernel Tuner leaves a cache open (without its closing braces) while it tunes.
    if not text.endswith("}\n}") and not text.endswith("}}"):
        text = text.rstrip(",") + "}\n}"
    return json.loads(text)


def is_valid(entry):
    return isinstance(entry.get("time"), (int, float)) and math.isfinite(entry["time"])


def budget_of(fraction, valid):
    """kf-tune's landscape benchmark's budget: rounded down, at least 2."""
    return max(2, math.floor(fraction * valid))


def run_one(cache_path, data, strategy, budget, seed):
    keys = data["tune_params_keys"]
    tune_params = {k: data["tune_params"][k] for k in keys}
    present = set(data["cache"])

    def restrict(p):
        # Configurations absent from the cache were excluded by the space's own restrictions.
        return ",".join(str(p[k]) for k in keys) in present

    random.seed(seed)
    np.random.seed(seed)
    problem_size = data.get("problem_size", 1)
    _SEEN.clear()
    _DISTINCT.clear()
    _SINCE_NEW[0] = 0
    stalled = False
    signal.alarm(RUN_SECONDS)
    try:
        with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            tune_kernel(
                data["kernel_name"],
                "__kernel void dummy() {}",
                problem_size,
                [],
                tune_params,
                lang="OpenCL",
                restrictions=restrict,
                cache=str(cache_path),
                simulation_mode=True,
                strategy=strategy,
                strategy_options={"max_fevals": budget},
                verbose=False,
                quiet=True,
            )
    except RunTimeout:
        stalled = True
    finally:
        signal.alarm(0)
    times = [r["time"] for r in _SEEN if r and isinstance(r.get("time"), (int, float))]
    return (min(times) if times else None), stalled


def mean_se(xs):
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return m, math.sqrt(var / len(xs))


def compare(kf_path, kt_path):
    kf = json.loads(Path(kf_path).read_text())["cells"]
    kt = json.loads(Path(kt_path).read_text())["cells"]
    key = lambda c: (c["landscape"], round(c["budget"], 9))
    default = {key(c): c for c in kf if c["strategy"] == "default"}
    if not default:
        sys.exit(f"{kf_path} has no cells of the default strategy")
    by_cell = {}
    for c in kt:
        by_cell.setdefault(key(c), []).append(c)
    print()
    print("| landscape | budget | kf default | Kernel Tuner's best (strategy) | difference | verdict |")
    print("|---|---|---|---|---|---|")
    behind = ahead = level = 0
    for k, d in default.items():
        if k not in by_cell:
            continue
        dm, dse = mean_se(d["scores"])
        best = max(by_cell[k], key=lambda c: mean_se(c["scores"])[0])
        bm, bse = mean_se(best["scores"])
        diff = dm - bm
        noise = 2 * math.sqrt(dse ** 2 + bse ** 2)
        if diff < -noise:
            verdict, behind = "behind", behind + 1
        elif diff > noise:
            verdict, ahead = "ahead", ahead + 1
        else:
            verdict, level = "within noise", level + 1
        print(f"| {k[0]} ({d['valid']} valid) | {k[1]:.1%} | {dm:.3f} ± {dse:.3f} | "
              f"{bm:.3f} ± {bse:.3f} ({best['strategy']}) | {diff:+.3f} (noise {noise:.3f}) | {verdict} |")
    print(f"\nkf default against Kernel Tuner's best strategy per cell: ahead in {ahead}, "
          f"within noise in {level}, behind in {behind} of {ahead + level + behind} cells")
    print()
    print("Mean of the cell means over the cells both tools ran:")
    print("| tool:strategy | mean | worst cell |")
    print("|---|---|---|")
    cells = set(default) & set(by_cell)
    rows = []
    for tool, source in (("kf", kf), ("kt", kt)):
        names = sorted({c["strategy"] for c in source})
        for n in names:
            ms = [mean_se(c["scores"])[0] for c in source if c["strategy"] == n and key(c) in cells]
            if len(ms) == len(cells):
                rows.append((sum(ms) / len(ms), min(ms), f"{tool}:{n}"))
    for m, worst, name in sorted(rows, reverse=True):
        print(f"| {name} | {m:.4f} | {worst:.3f} |")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--synthetic", help="folder of KIND_SEED.json instances (landscapes --write-kt)")
    ap.add_argument("--measured", nargs="*", default=[], help="measured cache files (.json, .json.gz)")
    ap.add_argument("--strategies", default="random_sample,genetic_algorithm,simulated_annealing,"
                    "greedy_ils,mls,pso,diff_evo,dual_annealing,firefly_algorithm,bayes_opt")
    ap.add_argument("--budgets", default="0.005,0.01,0.02,0.05")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--seed0", type=int, default=0)
    a = ap.parse_args()

    landscapes = []  # (name, {seed: path})
    if a.synthetic:
        by_kind = {}
        for f in sorted(Path(a.synthetic).glob("*.json")):
            m = re.fullmatch(r"(.+)_(\d+)\.json", f.name)
            if m:
                by_kind.setdefault(m.group(1), {})[int(m.group(2))] = f
        for kind, files in sorted(by_kind.items()):
            landscapes.append((f"synthetic {kind}", files))
    for f in a.measured:
        f = Path(f)
        name = f.name.removesuffix(".gz").removesuffix(".json")
        landscapes.append((name, {None: f}))

    with tempfile.TemporaryDirectory(prefix="kt-landscapes.") as tmp:
        cells = simulate(landscapes, a, Path(tmp))
    print(json.dumps({"tool": "kernel_tuner", "cells": cells}))


def simulate(landscapes, a, tmp):
    """Every landscape × budget × strategy cell, scored over the seeds; `tmp` holds Kernel
    Tuner's private cache copies."""
    cells = []
    started = time.perf_counter()
    for name, files in landscapes:
        loaded = {}
        for seed in range(a.seed0, a.seed0 + a.seeds):
            src = files.get(seed, files.get(None))
            if src is None:
                sys.exit(f"{name}: no instance for seed {seed}")
            if src not in loaded:
                data = read_cache(src)
                # Kernel Tuner opens caches by name and may append to them: give it a private,
                # uncompressed copy.
                copy = tmp / f"{len(loaded)}_{abs(hash(str(src)))}.json"
                copy.write_text(json.dumps(data))
                valid = [e["time"] for e in data["cache"].values() if is_valid(e)]
                loaded[src] = (copy, data, min(valid), len(valid))
        # The budget is a fraction of the first seed's instance, as in kf-tune's benchmark.
        first = loaded[files.get(a.seed0, files.get(None))][3]
        for fraction in [float(x) for x in a.budgets.split(",")]:
            budget = budget_of(fraction, first)
            for strategy in a.strategies.split(","):
                scores, stalls = [], 0
                for seed in range(a.seed0, a.seed0 + a.seeds):
                    src = files.get(seed, files.get(None))
                    copy, data, optimum, _ = loaded[src]
                    best, stalled = run_one(copy, data, strategy, budget, seed)
                    scores.append(optimum / best if best else 0.0)
                    stalls += stalled
                cells.append({"landscape": name, "budget": fraction, "valid": first,
                              "strategy": strategy, "scores": scores, "stalled": stalls})
                print(f"{name} {fraction:.1%} {strategy}: {np.mean(scores):.3f}"
                      + (f", {stalls} stalled runs stopped" if stalls else "")
                      + f" ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return cells


if __name__ == "__main__":
    main()
