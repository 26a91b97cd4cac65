#!/usr/bin/env bash
# The search-quality benchmark: the shipped gemm and softmax searches with their defaults (or the
# given sizes and budgets), one after the other, and a markdown table read from each run's
# report.json: the best kernel (GFLOP/s, or GB/s for a memory-bound task), the reference library
# measured in the same run side by side with the re-timed best kernel (NumPy's OpenBLAS for gemm,
# NumPy's row softmax for softmax) and their ratio, the fraction of the device's measured
# roofline, cells filled, candidates and device evaluations, wall time, and the machine's load
# before and after each run, and which machine gave each figure (the processor's lscpu model and
# its cache sizes, the CPUs the runs were pinned to). Regressions in what the search reaches
# show here, not in timed tests.
#
#   scripts/bench-search.sh [--task gemm|softmax|both] [--size SIZE] [--gemm-size N]...
#       [--evaluations N] [--seeds 0,1] [--cpus LIST] [--backend opencl]
#       [--out target/bench-search] [--quick] [-- EXTRA EXAMPLE ARGUMENTS]
#
# --size and --evaluations apply to every task given (default: each example's own defaults,
# gemm 1024³ with 60 candidates, softmax ROWS=4096,COLS=1024 with 60). --gemm-size, given once
# or more (--gemm-size 1024 --gemm-size 2048), runs the gemm example at each of those sizes in
# one call (it overrides --size for gemm). --cpus runs every example under `taskset -c LIST`
# (for example --cpus 0 for one core). Arguments after -- go to every example (for example
# -- --time 600). Needs the release
# examples (built here if missing) and the OpenCL runtime with NumPy (scripts/setup.sh). The
# device is characterised once by the first search when nothing is cached (kf devices
# --characterise): characterise on a quiet machine. Run folders go under --out (git-ignored).
#
# --quick is the form CI runs (under a minute, issue 62): both examples at size 128 with 4
# candidates and a 20-second limit each; options after it override its values. The script
# exits non-zero, after its table, when a run left no report or found no correct kernel.
set -euo pipefail
LOG_TAG=bench-search
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

task=both size="" evaluations="" seeds=0 backend=opencl out=target/bench-search cpus=""
gemm_sizes=() extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) task=both size=128 evaluations=4 extra=(--time 20); shift ;;
        --task) task=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --gemm-size) gemm_sizes+=("$2"); shift 2 ;;
        --cpus) cpus=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        --evaluations) evaluations=$2; shift 2 ;;
        --seeds) seeds=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) help_or_unknown "$1" ;;
    esac
done
tasks="$(search_examples "$task")"

# The machine, as lscpu names it: model (family/model/stepping), caches, and the CPUs used.
lscpu_field() { LC_ALL=C lscpu | sed -n "s/^$1:[[:space:]]*//p" | head -n1; }
machine="$(lscpu_field 'Model name') (family $(lscpu_field 'CPU family'), model $(lscpu_field 'Model'), stepping $(lscpu_field 'Stepping')); L1d $(lscpu_field 'L1d cache'), L2 $(lscpu_field 'L2 cache'), L3 $(lscpu_field 'L3 cache'); CPUs ${cpus:-$(lscpu_field 'On-line CPU(s) list')}"
# lscpu gives totals over the instances; what one core sees, from sysfs, beside them.
per_core=""
for index in /sys/devices/system/cpu/cpu0/cache/index*; do
    [ -r "$index/size" ] || continue
    [ "$(cat "$index/type")" = Instruction ] && continue
    per_core+="${per_core:+, }L$(cat "$index/level") $(cat "$index/size")"
done
[ -n "$per_core" ] && machine+="; per core: $per_core"
echo "machine: $machine" >&2
pin=()
[ -n "$cpus" ] && pin=(taskset -c "$cpus")

mkdir -p "$out"
rows="$out/rows.tsv"
: >"$rows"
for example in $tasks; do
    example_sizes=("$size")
    [ "$example" = gemm ] && [ ${#gemm_sizes[@]} -gt 0 ] && example_sizes=("${gemm_sizes[@]}")
    for example_size in "${example_sizes[@]}"; do
        for seed in ${seeds//,/ }; do
            dir="$out/$example${example_size:+-${example_size//[^A-Za-z0-9]/_}}-s$seed"
            rm -rf "$dir"
            args=(--backend "$backend" --seed "$seed" --out "$dir" --no-progress)
            [ -n "$example_size" ] && args+=(--size "$example_size")
            [ -n "$evaluations" ] && args+=(--evaluations "$evaluations")
            args+=("${extra[@]}")
            before="$(cut -d' ' -f1 /proc/loadavg)"
            echo "== $example seed $seed (load $before): ${pin[*]} target/release/examples/$example ${args[*]}" >&2
            "${pin[@]}" "target/release/examples/$example" "${args[@]}" >"$dir.log" 2>&1 ||
                echo "   (exit status $?; see $dir.log)" >&2
            after="$(cut -d' ' -f1 /proc/loadavg)"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$example" "$seed" "$before" "$after" \
                "$dir/report.json" "${example_size:-default}" "$machine" >>"$rows"
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

failed = []
machines = sorted({row[6] for row in rows})
for m in machines:
    print(f"machine: {m}\n")
print("| task | size | seed | best | reference (same run) | best re-timed / reference | roofline | cells | "
      "candidates | device evaluations | wall s | load before / after | machine |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for task, seed, before, after, path, size, machine in rows:
    r = read(path)
    if not r:
        print(f"| {task} | {size} | {seed} | no report | | | | | | | | {before} / {after} | {machine} |")
        failed.append(f"{task} {size} seed {seed}: no report ({path})")
        continue
    gbs = bool(r.get("memory_bound"))
    unit = "GB/s" if gbs else "GFLOP/s"
    best = r.get("best_gbs") if gbs else r.get("best_gflops")
    ref = r.get("reference_gbs") if gbs else r.get("reference_gflops")
    reference = r.get("reference") or {}
    library = " ".join(x for x in (reference.get("library"), reference.get("kernel")) if x)
    shown = f"{best:.1f} {unit}" if best else "no correct kernel"
    if not best:
        failed.append(f"{task} {size} seed {seed}: no correct kernel ({path})")
    ref_shown = f"{ref:.1f} {unit} ({library})" if ref else (r.get("reference_note") or "-")
    ratio = f"{r['reference_ratio']:.2f}x" if r.get("reference_ratio") else "-"
    roof = f"{100 * r['roofline_fraction']:.0f}%" if r.get("roofline_fraction") else "-"
    cells = f"{r.get('cells_filled', '')}/{r.get('cells_total', '')}"
    wall = f"{r['wall_seconds']:.0f}" if r.get("wall_seconds") else ""
    print(f"| {r.get('title', task)} | {size} | {seed} | {shown} | {ref_shown} | {ratio} | {roof} | {cells} | "
          f"{r.get('evaluations', '')} | {r.get('device_evaluations', '')} | {wall} | {before} / {after} | {machine} |")
if failed:
    sys.exit("bench-search: " + "; ".join(failed))
PY
