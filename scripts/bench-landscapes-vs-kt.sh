#!/usr/bin/env bash
# The landscape benchmark against Kernel Tuner: kf-tune's strategies (the landscapes example) and
# Kernel Tuner 1.5's strategies (its simulation mode, which reads the same cache files and runs
# nothing) on the same landscapes, budgets and seeds; prints, per cell, kf's default against
# Kernel Tuner's best strategy for that cell, and whether the default is behind it by more than
# the noise of 10 seeds (two standard errors of the difference of the means).
#
#   scripts/bench-landscapes-vs-kt.sh [--seeds 10] [--seed0 0] [--budgets 0.005,0.01,0.02,0.05]
#       [--shared ../shared/tuning-spaces] [--kt-strategies random_sample,...]
#       [--venv target/kt-venv] [--out DIR] [--quick]
#
# Landscapes: the synthetic kinds of kf_tune::synthetic (one instance per seed, written as
# Kernel Tuner caches), the caches in tuning-spaces/, and with --shared the shared folder's GPU
# caches. Kernel Tuner is installed into a throw-away virtual environment (default
# target/kt-venv, git-ignored). --out keeps both tools' per-seed scores (kf.json, kt.json).
#
# --quick is the form CI runs (under a minute, issue 62): the same landscapes, caches and
# comparison with 2 seeds, one budget (2%) and Kernel Tuner's random_sample and
# genetic_algorithm; options after it override its values.
set -euo pipefail
LOG_TAG=landscapes-vs-kt
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

seeds=10 seed0=0 budgets=0.005,0.01,0.02,0.05 shared="" out="" venv=target/kt-venv
kt_strategies=random_sample,genetic_algorithm,simulated_annealing,greedy_ils,mls,pso,diff_evo,dual_annealing,firefly_algorithm,bayes_opt
while [ $# -gt 0 ]; do
    case "$1" in
    --seeds | --seed0 | --budgets | --shared | --kt-strategies | --venv | --out) need_value $# "$1" ;;
    esac
    case "$1" in
    --quick) seeds=2 budgets=0.02 kt_strategies=random_sample,genetic_algorithm; shift ;;
    --seeds) seeds=$2; shift 2 ;;
    --seed0) seed0=$2; shift 2 ;;
    --budgets) budgets=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --kt-strategies) kt_strategies=$2; shift 2 ;;
    --venv) venv=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) help_or_unknown "$1" ;;
    esac
done

kt_venv "$venv"
cargo build --release -q -p kf-tune --example landscapes >&2
landscapes=target/release/examples/landscapes

work="${out:-$(mktemp -d /tmp/kf-landscapes-kt.XXXXXX)}"
mkdir -p "$work/synthetic"
[ -n "$out" ] || trap 'rm -rf "$work"' EXIT

measured=(tuning-spaces/*.json)
shared_args=()
if [ -n "$shared" ]; then
    [ -d "$shared" ] || die "--shared $shared is not a folder"
    shared_args=(--shared "$shared")
    for f in "$shared"/*.json "$shared"/*.json.gz; do
        case "$f" in *.T1.json | *'*'*) continue ;; esac
        measured+=("$f")
    done
fi

echo "machine: $(nproc) cores; load before: $(uptime)"
"$landscapes" --write-kt "$work/synthetic" --seeds "$seeds" --seed0 "$seed0" >/dev/null
log "kf-tune's strategies"
"$landscapes" --seeds "$seeds" --seed0 "$seed0" --budgets "$budgets" "${shared_args[@]}" \
    --json "$work/kf.json" >"$work/kf.md"
log "Kernel Tuner's strategies (simulation mode)"
"$venv/bin/python" scripts/kt_landscapes.py --synthetic "$work/synthetic" \
    --measured "${measured[@]}" --strategies "$kt_strategies" --budgets "$budgets" \
    --seeds "$seeds" --seed0 "$seed0" >"$work/kt.json"
sed -n '/^Mean over/,$p' "$work/kf.md"
"$venv/bin/python" scripts/kt_landscapes.py compare "$work/kf.json" "$work/kt.json"
echo "load after: $(uptime)"
