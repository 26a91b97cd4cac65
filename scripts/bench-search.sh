#!/usr/bin/env bash
# The search-quality benchmark: the shipped gemm and softmax searches with their defaults (or the
# given sizes and budgets), one after the other, and a markdown table read from each run's
# report.json: the best kernel (GFLOP/s, or GB/s for a memory-bound task), the reference library
# measured in the same run side by side with the re-timed best kernel (NumPy's OpenBLAS for gemm,
# NumPy's row softmax for softmax) and their ratio, the fraction of the device's measured
# roofline, cells filled, candidates and device evaluations, wall time, and the machine's load
# before and after each run. Regressions in what the search reaches show here, not in timed tests.
#
#   scripts/bench-search.sh [--task gemm|softmax|both] [--size SIZE] [--evaluations N]
#       [--seeds 0,1] [--backend opencl] [--out target/bench-search]
#
# --size and --evaluations apply to every task given (default: each example's own defaults,
# gemm 1024³ with 60 candidates, softmax ROWS=4096,COLS=1024 with 60). Needs the release
# examples (built here if missing) and the OpenCL runtime with NumPy (scripts/setup.sh). The
# device is characterised once by the first search when nothing is cached (kf devices
# --characterise): characterise on a quiet machine. Run folders go under --out (git-ignored).
set -euo pipefail
LOG_TAG=bench-search
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

task=both size="" evaluations="" seeds=0 backend=opencl out=target/bench-search
while [ $# -gt 0 ]; do
    case "$1" in
        --task) task=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --evaluations) evaluations=$2; shift 2 ;;
        --seeds) seeds=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) help_or_unknown "$1" ;;
    esac
done
tasks="$(search_examples "$task")"

mkdir -p "$out"
rows="$out/rows.tsv"
: >"$rows"
for example in $tasks; do
    for seed in ${seeds//,/ }; do
        dir="$out/$example-s$seed"
        rm -rf "$dir"
        args=(--backend "$backend" --seed "$seed" --out "$dir" --no-progress)
        [ -n "$size" ] && args+=(--size "$size")
        [ -n "$evaluations" ] && args+=(--evaluations "$evaluations")
        before="$(cut -d' ' -f1 /proc/loadavg)"
        echo "== $example seed $seed (load $before): target/release/examples/$example ${args[*]}" >&2
        "target/release/examples/$example" "${args[@]}" >"$dir.log" 2>&1 ||
            echo "   (exit status $?; see $dir.log)" >&2
        after="$(cut -d' ' -f1 /proc/loadavg)"
        printf '%s\t%s\t%s\t%s\t%s\n' "$example" "$seed" "$before" "$after" "$dir/report.json" >>"$rows"
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

print("| task | seed | best | reference (same run) | best re-timed / reference | roofline | cells | "
      "candidates | device evaluations | wall s | load before / after |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for task, seed, before, after, path in rows:
    r = read(path)
    if not r:
        print(f"| {task} | {seed} | no report | | | | | | | | {before} / {after} |")
        continue
    gbs = bool(r.get("memory_bound"))
    unit = "GB/s" if gbs else "GFLOP/s"
    best = r.get("best_gbs") if gbs else r.get("best_gflops")
    ref = r.get("reference_gbs") if gbs else r.get("reference_gflops")
    reference = r.get("reference") or {}
    library = " ".join(x for x in (reference.get("library"), reference.get("kernel")) if x)
    shown = f"{best:.1f} {unit}" if best else "no correct kernel"
    ref_shown = f"{ref:.1f} {unit} ({library})" if ref else (r.get("reference_note") or "-")
    ratio = f"{r['reference_ratio']:.2f}x" if r.get("reference_ratio") else "-"
    roof = f"{100 * r['roofline_fraction']:.0f}%" if r.get("roofline_fraction") else "-"
    cells = f"{r.get('cells_filled', '')}/{r.get('cells_total', '')}"
    wall = f"{r['wall_seconds']:.0f}" if r.get("wall_seconds") else ""
    print(f"| {r.get('title', task)} | {seed} | {shown} | {ref_shown} | {ratio} | {roof} | {cells} | "
          f"{r.get('evaluations', '')} | {r.get('device_evaluations', '')} | {wall} | {before} / {after} |")
PY
