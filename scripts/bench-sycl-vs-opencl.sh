#!/usr/bin/env bash
# Side by side: the shipped gemm and softmax searches with --backend opencl and --backend sycl on
# the same CPU device, one after the other (OpenCL first, then SYCL, per size and seed), with the
# same size, budget and seed (gemm at each of --sizes, softmax at its default size). Prints a markdown table (best GFLOP/s or GB/s, cells filled, wall
# time, SYCL/OpenCL ratio of the bests) and the machine's load before each run.
#
#   scripts/bench-sycl-vs-opencl.sh [--task gemm|softmax|both] [--sizes 512,1024]
#       [--evaluations 60] [--seeds 0] [--time SECONDS] [--out target/sycl-vs-opencl] [--quick]
#
# --time sets both runs' wall-clock limit (default: the examples' own, 9 minutes for gemm and 5
# for softmax), so that a SYCL run, whose kernels take seconds each to build, gets the same
# candidate budget as the OpenCL one instead of being stopped by the clock first.
#
# Needs the release examples (built here if missing: cargo build --release --examples) and the
# OpenCL and SYCL runtimes (scripts/setup.sh --opencl --sycl). Run folders go under --out (git-ignored under target/).
#
# --quick is the form CI runs (under a minute, issue 62): gemm at 128 with 3 candidates and a
# 20-second limit per backend; options after it override its values. The script exits non-zero,
# after its table, when a run left no report or found no correct kernel.
set -euo pipefail
LOG_TAG=bench-sycl-vs-opencl
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

task=both sizes=512,1024 evaluations=60 seeds=0 time= out=target/sycl-vs-opencl
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) task=gemm sizes=128 evaluations=3 time=20; shift ;;
        --task) task=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --evaluations) evaluations=$2; shift 2 ;;
        --seeds) seeds=$2; shift 2 ;;
        --time) time=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) help_or_unknown "$1" ;;
    esac
done
tasks="$(search_examples "$task")"

mkdir -p "$out"
rows="$out/rows.tsv"
: >"$rows"
for example in $tasks; do
    # Softmax runs at its default size only (ROWS=4096,COLS=1024), gemm at each of --sizes.
    task_sizes=$sizes
    [ "$example" = softmax ] && task_sizes=ROWS=4096+COLS=1024
    for size in ${task_sizes//,/ }; do
        arg=${size//+/,}
        for seed in ${seeds//,/ }; do
            for backend in opencl sycl; do
                dir="$out/$example-$size-s$seed-$backend"
                rm -rf "$dir"
                load="$(cut -d' ' -f1 /proc/loadavg)"
                echo "== $example $arg seed $seed $backend (load $load)" >&2
                "target/release/examples/$example" --backend "$backend" --size "$arg" \
                    --evaluations "$evaluations" --seed "$seed" --out "$dir" --no-progress \
                    ${time:+--time "$time"} \
                    >"$dir.log" 2>&1 || echo "   (exit status $?; see $dir.log)" >&2
                printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$example" "$arg" "$seed" "$backend" "$load" \
                    "$dir/report.json" >>"$rows"
            done
        done
    done
done

python3 - "$rows" <<'PY'
import json, sys

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
def read(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None
def best(r):
    if not r:
        return None, ""
    if r.get("memory_bound") and r.get("best_gbs"):
        return r["best_gbs"], "GB/s"
    return r.get("best_gflops"), "GFLOP/s"

failed = []
print("| task | size | seed | backend | best | cells | evaluations | wall s | load | SYCL / OpenCL |")
print("|---|---|---|---|---|---|---|---|---|---|")
opencl_best = {}
for task, size, seed, backend, load, path in rows:
    r = read(path)
    value, unit = best(r)
    key = (task, size, seed)
    ratio = ""
    if backend == "opencl":
        opencl_best[key] = value
    elif value and opencl_best.get(key):
        ratio = f"{value / opencl_best[key]:.2f}x"
    shown = f"{value:.1f} {unit}" if value else "no correct kernel"
    if not value:
        failed.append(f"{task} {size} seed {seed} {backend}: no correct kernel or no report ({path})")
    cells = r.get("cells_filled", "") if r else ""
    evals = r.get("evaluations", "") if r else ""
    wall = f"{r['wall_seconds']:.0f}" if r and r.get("wall_seconds") else ""
    print(f"| {task} | {size} | {seed} | {backend} | {shown} | {cells} | {evals} | {wall} | {load} | {ratio} |")
if failed:
    sys.exit("bench-sycl-vs-opencl: " + "; ".join(failed))
PY
