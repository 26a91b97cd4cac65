#!/usr/bin/env bash
# A user's own operator that nobody prepared a family for (issue 60): the row RMS
# normalisation task file tests/data/rms_norm/rms_norm.toml (a NumPy reference, no [family]
# table, the naive kernel a user writes first: one row per work-item, serial loops). The
# search reads the operator from the reference's trace (kf-graph) and seeds the row templates;
# this prints the family `kf task check` traced, the naive kernel's and the best kernel's
# GFLOP/s timed in the same run, their ratio, the cells filled, the processor and the load.
#
#   scripts/bench-own-operator.sh [--evaluations 16] [--size ROWS=4096,LEN=1024]
#       [--out target/bench-own-operator] [--quick] [-- EXTRA kf search ARGUMENTS]
#
# --quick is the form CI runs (issue 62): 4 candidates at ROWS=256 with a 20-second limit.
# The script fails when the trace shows no family, or the search leaves no report or no
# correct kernel. Needs the release kf binary (built here if missing) and the OpenCL runtime
# with NumPy (scripts/setup.sh). The run folder goes under --out (git-ignored).
set -euo pipefail
LOG_TAG=bench-own-operator
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

evaluations=16 size="ROWS=4096,LEN=1024" out=target/bench-own-operator extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --size | --evaluations | --out) need_value $# "$1" ;;
    esac
    case "$1" in
        --quick) evaluations=4 size="ROWS=256,LEN=1024" extra=(--time 20); shift ;;
        --size) size=$2; shift 2 ;;
        --evaluations) evaluations=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) help_or_unknown "$1" ;;
    esac
done

[ -x target/release/kf ] || cargo build --release -q --bin kf >&2
task=tests/data/rms_norm/rms_norm.toml
model="$(LC_ALL=C lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)"
load() { cut -d' ' -f1-3 /proc/loadavg; }
rm -rf "$out"
mkdir -p "$out"

target/release/kf task check "$task" --size "$size" >"$out/check.txt" ||
    die "kf task check failed: $(tail -n 5 "$out/check.txt")"
grep -q '^family (traced from the reference):' "$out/check.txt" ||
    die "the reference's trace showed no family: $(grep '^family' "$out/check.txt")"
family="$(sed -n '/^family (traced/,$p' "$out/check.txt" | sed -n 's/^  \(kind\|op\) = "\(.*\)"/\2/p' | paste -sd ' ')"

before="$(load)"
target/release/kf search --task-file "$task" --size "$size" --evaluations "$evaluations" \
    --out "$out/search" "${extra[@]}" >&2
after="$(load)"
[ -f "$out/search/report.json" ] || die "the search left no report.json"
python3 - "$out/search/report.json" "$family" "$size" "$before" "$after" "$model" <<'PY'
import json, sys
report_path, family, size, before, after, model = sys.argv[1:]
r = json.load(open(report_path))
best, naive = r.get("best_gflops") or 0.0, r.get("baseline_gflops") or 0.0
print("| task | traced family | candidates | cells | naive GFLOP/s | best GFLOP/s | best / naive | roofline | load before / after |")
print("|---|---|---|---|---|---|---|---|---|")
ratio = f"{best / naive:.2f}x" if naive > 0 else "-"
roof = r.get("roofline_fraction")
print(f"| rms_norm {size} | {family} | {r.get('evaluations')} | {r.get('cells_filled')} | "
      f"{naive:.2f} | {best:.2f} | {ratio} | {f'{roof:.0%}' if roof else '-'} | {before} / {after} |")
print(f"processor: {model}")
sys.exit(0 if best > 0 and naive > 0 else 1)
PY
