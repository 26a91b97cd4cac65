#!/usr/bin/env bash
# Users' own operators that nobody prepared a family for (issue 60), task files with a NumPy
# reference, no [family] table and the naive kernel a user writes first: a row RMS
# normalisation (tests/data/rms_norm: one row per work-item, serial loops) and a linear layer
# with a bias and a ReLU (tests/data/linear_relu: one work-item per output). The search reads
# each operator from the reference's trace (kf-graph) and seeds the family's templates (the
# row normalisation template; the GEMM templates with the bias and the ReLU fused); this prints
# per task the family `kf task check` traced, the naive kernel's and the best kernel's GFLOP/s
# timed in the same run, their ratio, the cells filled, the processor and the load.
#
#   scripts/bench-own-operator.sh [--evaluations 16] [--task rms_norm|linear_relu]
#       [--out target/bench-own-operator] [--quick] [-- EXTRA kf search ARGUMENTS]
#
# Sizes: rms_norm at ROWS=4096, LEN=1024; linear_relu at BATCH=256, IN=OUT=1024 (the task
# files' own). --quick is the form CI runs (issue 62): 4 candidates at small sizes with a
# 20-second limit. The script fails when a trace shows no family, or a search leaves no report
# or no correct kernel. Needs the release kf binary (built here if missing) and the OpenCL runtime
# with NumPy (scripts/setup.sh). The run folder goes under --out (git-ignored).
set -euo pipefail
LOG_TAG=bench-own-operator
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

evaluations=16 out=target/bench-own-operator extra=() quick=0 tasks=(rms_norm linear_relu)
while [ $# -gt 0 ]; do
    case "$1" in
        --task | --evaluations | --out) need_value $# "$1" ;;
    esac
    case "$1" in
        --quick) evaluations=4 quick=1 extra=(--time 20); shift ;;
        --task) tasks=("$2"); shift 2 ;;
        --evaluations) evaluations=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) help_or_unknown "$1" ;;
    esac
done

[ -x target/release/kf ] || cargo build --release -q --bin kf >&2
model="$(LC_ALL=C lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)"
load() { cut -d' ' -f1-3 /proc/loadavg; }
rm -rf "$out"
mkdir -p "$out"

echo "| task | traced family | candidates | cells | naive GFLOP/s | best GFLOP/s | best / naive | roofline | load before / after |"
echo "|---|---|---|---|---|---|---|---|---|"
status=0
for name in "${tasks[@]}"; do
    case "$name" in
        rms_norm) size="ROWS=4096,LEN=1024" quick_size="ROWS=256,LEN=1024" ;;
        linear_relu) size="BATCH=256,IN=1024,OUT=1024" quick_size="BATCH=32,IN=256,OUT=256" ;;
        *) die "--task takes rms_norm or linear_relu, not $name" ;;
    esac
    [ "$quick" = 1 ] && size=$quick_size
    task=tests/data/$name/$name.toml
    target/release/kf task check "$task" --size "$size" >"$out/$name-check.txt" ||
        die "kf task check $task failed: $(tail -n 5 "$out/$name-check.txt")"
    grep -q '^family (traced from the reference):' "$out/$name-check.txt" ||
        die "$name: the reference's trace showed no family: $(grep '^family' "$out/$name-check.txt")"
    family="$(sed -n '/^family (traced/,$p' "$out/$name-check.txt" |
        sed -n 's/^  \(kind\|op\) = "\(.*\)"/\2/p' | paste -sd ' ')"
    before="$(load)"
    target/release/kf search --task-file "$task" --size "$size" --evaluations "$evaluations" \
        --out "$out/$name" "${extra[@]}" >&2
    after="$(load)"
    [ -f "$out/$name/report.json" ] || die "$name: the search left no report.json"
    python3 - "$out/$name/report.json" "$name $size" "$family" "$before" "$after" <<'PY' || status=1
import json, sys
report_path, label, family, before, after = sys.argv[1:]
r = json.load(open(report_path))
best, naive = r.get("best_gflops") or 0.0, r.get("baseline_gflops") or 0.0
ratio = f"{best / naive:.2f}x" if naive > 0 else "-"
roof = r.get("roofline_fraction")
print(f"| {label} | {family} | {r.get('evaluations')} | {r.get('cells_filled')} | "
      f"{naive:.2f} | {best:.2f} | {ratio} | {f'{roof:.0%}' if roof else '-'} | {before} / {after} |")
sys.exit(0 if best > 0 and naive > 0 else 1)
PY
done
echo "processor: $model"
[ "$status" = 0 ] || die "a search found no correct kernel"
