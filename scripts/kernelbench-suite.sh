#!/usr/bin/env bash
# A whole KernelBench level, problem by problem (issue 60): each problem file of DIR is
# imported by `kf task import-kernelbench --fit` (the size rule: one common factor for every
# size until inputs, weights and outputs take at most 32 MiB and the products at most
# 2 GFLOP), then searched by `kf bench kernelbench` with the budget below, PyTorch timed in the
# same run where it is installed. Every problem gets a row: its verdict, or the reason it was
# not run (the importer's refusal names the construct). Results are kept per problem under
# OUT/results, so a run can stop and resume, and a level can be measured in shards on one
# commit (--shard K/N takes the problems whose index in name order is K modulo N). The table
# (OUT/suite.md, also printed) has one row per problem with its sizes, the load average before
# and after it, and a summary per category (matrix products, convolutions, element-wise,
# reductions and norms, losses, scans, pooling) and for the whole level: correct problems, the
# geometric mean over PyTorch eager and over the naive kernels, fast_1.
#
#   scripts/kernelbench-suite.sh [--dir ../shared/kernelbench/level1] [--out runs/kernelbench-suite]
#       [--shard K/N] [--evaluations 12] [--time 60] [--report] [--quick]
#
# --report only prints the table of the results so far. --quick is the form CI runs: three
# vendored problems of each level (tests/data/kernelbench_level1/vendor and
# tests/data/kernelbench_level2/vendor) imported at small sizes (--max-size 8 instead of the
# size rule, which tests/kernelbench_import.rs checks) with 3 candidates and 20 s each; it fails
# unless every problem gets a row and at least one per level is correct. --time bounds each problem's search (the
# evaluation in flight and the final re-timing included; the PyTorch timing is outside it); a
# problem's whole process is still stopped after 4 × --time + 300 s and reported as such, for a
# PyTorch timing or anything else that hangs. KF names the kf
# binary (default target/release/kf, built when missing).
set -euo pipefail
LOG_TAG=kernelbench-suite
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

dirs=(../shared/kernelbench/level1) out=runs/kernelbench-suite shard=0/1 evaluations=12 time=60
report_only=0 quick=0 sizing=(--fit)
while [ $# -gt 0 ]; do
    case "$1" in
        --dir | --out | --shard | --evaluations | --time) need_value $# "$1" ;;
    esac
    case "$1" in
        --dir) dirs=("$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        --shard) shard=$2; shift 2 ;;
        --evaluations) evaluations=$2; shift 2 ;;
        --time) time=$2; shift 2 ;;
        --report) report_only=1; shift ;;
        --quick)
            quick=1 evaluations=3 time=20 out=target/kernelbench-suite-quick sizing=(--max-size 8)
            dirs=(tests/data/kernelbench_level1/vendor tests/data/kernelbench_level2/vendor)
            shift ;;
        *) help_or_unknown "$1" ;;
    esac
done
[[ "$shard" =~ ^[0-9]+/[1-9][0-9]*$ ]] || die "--shard takes K/N (0 <= K < N), not $shard"
shard_k=${shard%/*} shard_n=${shard#*/}
[ "$shard_k" -lt "$shard_n" ] || die "--shard $shard: K must be below N"
kf=${KF:-target/release/kf}
if [ "$report_only" = 0 ]; then
    [ -x "$kf" ] || cargo build --release -q --bin kf >&2
    [ -f .runtime/env.sh ] && . .runtime/env.sh
fi
mkdir -p "$out/results"
load() { cut -d' ' -f1-3 /proc/loadavg; }

# run_problem FILE LEVEL: imports, searches and records one problem.
run_problem() {
    local file=$1 level=$2 stem started status reason="" before after
    stem=$(basename "$file" .py)
    local result="$out/results/$level-$stem.json" task="$out/tasks/$level/$stem" runs="$out/runs/$level"
    [ -f "$result" ] && { log "$level/$stem: done before (resume)"; return 0; }
    before=$(load)
    started=$(date +%s)
    rm -rf "$task" "$runs/$stem"
    mkdir -p "$out/tasks/$level" "$runs"
    status=0
    timeout --kill-after=10 300 "$kf" task import-kernelbench "$file" "${sizing[@]}" --out "$task" \
        >"$out/results/$level-$stem.import.log" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        # The importer's last line, without the program's name and the problem's path.
        reason="not imported: $(grep -v '^\s*$' "$out/results/$level-$stem.import.log" | tail -n 1 |
            sed -e 's/^kf: //' -e 's#^[^ ]*\.py: ##')"
        [ "$status" = 124 ] && reason="not imported: the import ran past 300 s"
    else
        status=0
        timeout --kill-after=10 $((4 * time + 300)) "$kf" bench kernelbench \
            --tasks-dir "$out/tasks/$level" --tasks "$stem" --evaluations "$evaluations" \
            --time "$time" --out "$runs" --no-progress \
            >"$out/results/$level-$stem.bench.log" 2>&1 || status=$?
        if [ "$status" = 124 ] || [ "$status" = 137 ]; then
            reason="stopped: the whole run passed $((4 * time + 300)) s"
        elif [ ! -f "$runs/kernelbench.json" ]; then
            reason="search failed: $(grep -v '^\s*$' "$out/results/$level-$stem.bench.log" | tail -n 1)"
        fi
    fi
    after=$(load)
    python3 - "$result" "$level" "$stem" "$task/task.toml" "$runs/kernelbench.json" "$reason" \
        "$before" "$after" "$(( $(date +%s) - started ))" <<'PY'
import json, os, sys, tomllib
result, level, stem, task, bench, reason, before, after, seconds = sys.argv[1:]
row = {"level": level, "problem": stem, "load_before": before, "load_after": after,
       "seconds": int(seconds), "sizes": "", "family": None}
try:
    spec = tomllib.load(open(task, "rb"))
    row["sizes"] = ",".join(f"{k}={v}" for k, v in spec.get("sizes", {}).items())
    row["family"] = (spec.get("family") or {}).get("kind")
except (OSError, ValueError):
    pass
if reason:
    row["verdict"] = reason
else:
    tasks = json.load(open(bench)).get("tasks", [])
    t = tasks[0] if tasks else {}
    row["verdict"] = "correct" if t.get("correct") else (t.get("error") or "no correct kernel")
    for k in ("evaluations", "baseline_s", "best_s", "torch_s", "torch_note", "roofline_fraction"):
        row[k] = t.get(k)
tmp = result + ".tmp"
with open(tmp, "w") as f:
    json.dump(row, f, indent=1)
os.replace(tmp, result)
print(f"{level}/{stem}: {row['verdict']} ({row['seconds']} s)", file=sys.stderr)
PY
}

if [ "$report_only" = 0 ]; then
    for dir in "${dirs[@]}"; do
        [ -d "$dir" ] || die "no problem folder $dir"
        level=$(basename "$dir")
        [ "$level" = vendor ] && level=$(basename "$(dirname "$dir")" | sed 's/^kernelbench_//')
        files=()
        while IFS= read -r f; do files+=("$f"); done < <(ls "$dir"/*.py | LC_ALL=C sort -t/ -k1,1 -V)
        [ "$quick" = 1 ] && files=("${files[@]:0:3}")
        for i in "${!files[@]}"; do
            [ $((i % shard_n)) = "$shard_k" ] || continue
            run_problem "${files[$i]}" "$level"
        done
    done
fi

python3 - "$out" "$quick" "$(LC_ALL=C lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)" \
    "$(LC_ALL=C lscpu | sed -n 's/^\(L[123][di]* cache\):[[:space:]]*/\1 /p' | paste -sd ';' - | sed 's/;/; /g')" <<'PY'
import glob, json, math, os, re, sys
out, quick, model, caches = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4]
rows = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "results", "*.json")))]
def category_of(level, stem):
    """The category from the problem's name: for level 1 the first rule that matches
    (Max_Pooling is pooling), for level 2 the operation written first (Conv2d_ReLU is a
    convolution). `max`/`min` only as words: MinGPTNewGelu is element-wise."""
    name = re.sub(r"^\d+_", "", stem.lower())
    rules = [("convolutions", r"conv"), ("matrix products", r"matmul|gemm|bmm|matrix|linear|einsum|attention"),
             ("losses", r"loss|divergence"), ("scans", r"cumsum|cumprod|scan"), ("pooling", r"pool"),
             ("reductions and norms", r"norm|softmax|sum|mean|(?<![a-z])(max|min)(?![a-z])|argm|logsumexp|reduction")]
    found = [(m.start(), order, label) for order, (label, pattern) in enumerate(rules)
             for m in [re.search(pattern, name)] if m]
    key = (lambda f: (f[0], f[1])) if level == "level2" else (lambda f: f[1])
    return min(found, key=key)[2] if found else "element-wise"
for r in rows:
    r["category"] = category_of(r["level"], r["problem"])
def geo(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None
def ratio(row, key):
    return row[key] / row["best_s"] if row.get("verdict") == "correct" and row.get(key) and row.get("best_s") else None
lines = ["| level | problem | category | sizes | verdict | naive ms | best ms | PyTorch ms | x PyTorch | x naive | s | load before / after |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
ms = lambda v: f"{v * 1e3:.4g}" if v else "-"
x = lambda v: f"{v:.2f}" if v else "-"
for r in sorted(rows, key=lambda r: (r["level"], int(r["problem"].split("_")[0]) if r["problem"].split("_")[0].isdigit() else 0)):
    lines.append(f"| {r['level']} | {r['problem']} | {r['category']} | {r['sizes']} | {r['verdict']} | "
                 f"{ms(r.get('baseline_s'))} | {ms(r.get('best_s'))} | {ms(r.get('torch_s'))} | "
                 f"{x(ratio(r, 'torch_s'))} | {x(ratio(r, 'baseline_s'))} | {r['seconds']} | {r['load_before']} / {r['load_after']} |")
lines += ["", "| level | category | problems | correct | geomean x PyTorch | geomean x naive | fast_1 |", "|---|---|---|---|---|---|---|"]
groups = {}
for r in rows:
    groups.setdefault((r["level"], r["category"]), []).append(r)
    groups.setdefault((r["level"], "all"), []).append(r)
for (level, category), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])):
    correct = [r for r in rs if r["verdict"] == "correct"]
    timed = [r for r in rs if r.get("torch_s")]
    fast1 = (f"{sum(1 for r in rs if (ratio(r, 'torch_s') or 0) > 1.0) / len(timed):.2f}" if timed else "-")
    lines.append(f"| {level} | {'**all**' if category == 'all' else category} | {len(rs)} | {len(correct)} | "
                 f"{x(geo(ratio(r, 'torch_s') for r in correct))} | {x(geo(ratio(r, 'baseline_s') for r in correct))} | {fast1} |")
lines += ["", f"processor: {model} ({caches}); {sum(r['seconds'] for r in rows)} s over {len(rows)} problems"]
text = "\n".join(lines)
open(os.path.join(out, "suite.md"), "w").write(text + "\n")
print(text)
if quick:
    levels = {r["level"] for r in rows}
    bad = [lv for lv in ("level1", "level2") if not any(r["level"] == lv and r["verdict"] == "correct" for r in rows)]
    if len(rows) < 6 or bad:
        sys.exit(f"quick suite: {len(rows)} rows; no correct problem in {bad or levels}")
PY
