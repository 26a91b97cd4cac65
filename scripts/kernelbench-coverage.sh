#!/usr/bin/env bash
# What of a KernelBench level imports and whether its naive kernel is correct, before any
# search (issue 60; docs/kernelbench/naive-coverage.md): each problem file of DIR is imported
# by `kf task import-kernelbench --fit` (the size rule) and its generated naive kernel
# evaluated by `kf eval --json` on the evaluator's input sets; also each generated seed kernel
# (the task file's `seeds`) at its first parameter values. Prints one Markdown row per problem:
# level, problem, imported, naive kernel verdict, naive ms, generated seeds with their verdict
# and ms, why not, commit; then the counts and the load average before and after.
#
#   scripts/kernelbench-coverage.sh [--dir ../shared/kernelbench/level1] [--out target/kernelbench-coverage]
#       [--quick]
#
# --quick is the form CI runs: the three vendored problems of tests/data/kernelbench_level1/vendor
# at small sizes (--max-size 8 instead of the size rule); it fails unless each imports with a
# correct naive kernel.
# Needs the release kf binary (built here if missing) and the OpenCL runtime with NumPy
# (scripts/setup.sh). PyTorch is not needed: without it the NumPy stand-in is the reference.
set -euo pipefail
LOG_TAG=kernelbench-coverage
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

dir=../shared/kernelbench/level1 out=target/kernelbench-coverage quick=0 sizing=(--fit)
while [ $# -gt 0 ]; do
    case "$1" in
        --dir | --out) need_value $# "$1" ;;
    esac
    case "$1" in
        --dir) dir=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --quick)
            quick=1 dir=tests/data/kernelbench_level1/vendor sizing=(--max-size 8)
            shift
            ;;
        *) help_or_unknown "$1" ;;
    esac
done
[ -d "$dir" ] || die "no folder $dir"
[ -x target/release/kf ] || cargo build --release -q --bin kf >&2
level="$(basename "$dir")"
[ "$level" = vendor ] && level="$(basename "$(dirname "$dir")")"
commit="$(git rev-parse --short HEAD)"
mkdir -p "$out/$level"
load() { cut -d' ' -f1-3 /proc/loadavg; }
verdict() { # task.toml manifest -> "status ms"
    target/release/kf eval --task-file "$1" --kernel "$2" --json 2>/dev/null |
        python3 -c 'import json,sys
try:
    d = json.load(sys.stdin)
    print(d.get("status", "-"), "%.4g" % d["median_ms"] if d.get("median_ms") else "-")
except Exception:
    print("error -")'
}
echo "load before: $(load)" >&2
echo "| level | problem | imported | naive kernel | naive ms | generated seeds | why not | commit |"
echo "|---|---|---|---|---|---|---|---|"
imported=0 correct=0 total=0
for problem in "$dir"/*.py; do
    stem="$(basename "$problem" .py)"
    task="$out/$level/$stem"
    total=$((total + 1))
    rm -rf "$task"
    if ! said="$(timeout 900 target/release/kf task import-kernelbench "$problem" --out "$task" "${sizing[@]}" 2>&1)" ||
        [ ! -f "$task/naive.toml" ]; then
        why="$(printf '%s' "$said" | tail -n 1 | sed -e 's/^kf: //' -e 's#^[^ ]*\.py: ##' \
            -e 's#^\(the imported task file does not validate: \)[^ ]*task\.toml: #\1#' \
            -e 's/|/\\|/g' | cut -c1-240)"
        echo "| $level | $stem | no | - | - | - | $why | \`$commit\` |"
        continue
    fi
    imported=$((imported + 1))
    read -r status ms < <(verdict "$task/task.toml" "$task/naive.toml")
    [ "$status" = correct ] && correct=$((correct + 1))
    seeds=""
    for seed in $(sed -n 's/^seeds = \[\(.*\)\]$/\1/p' "$task/task.toml" | tr -d '",'); do
        read -r s_status s_ms < <(verdict "$task/task.toml" "$task/$seed")
        seeds="$seeds${seeds:+; }${seed%.toml} $s_status $s_ms"
    done
    echo "| $level | $stem | yes | $status | $ms | ${seeds:--} |  | \`$commit\` |"
done
echo
echo "$level: $imported of $total import with a naive kernel, $correct of them correct."
echo "load after: $(load)" >&2
if [ "$quick" = 1 ] && [ "$correct" != "$total" ]; then
    die "quick coverage: $correct of $total problems have a correct naive kernel"
fi
