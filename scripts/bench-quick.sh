#!/usr/bin/env bash
# Every benchmark script's quick form, one after the other, as CI runs them (issue 62): the
# same scripts, manifests, translations and harnesses as the full runs, at sizes and budgets
# that take under a minute each, so that a change that breaks a benchmark fails CI. Prints each
# script's output, then a table of the seconds each took, and fails when any of them fails.
#
#   scripts/bench-quick.sh [--out target/bench-quick]
#
# Also checks that the Kernel Tuner side-by-side stops, naming the fact, when the device facts
# lack one its manifest uses (l2_cache_bytes): the failure that once let it break unseen.
#
# Needs what the full runs need: the release kf binary and examples (built here when missing),
# the OpenCL and SYCL runtimes with NumPy (scripts/setup.sh --opencl --sycl); Kernel Tuner is
# installed into target/kt-venv by the scripts that use it.
set -euo pipefail
LOG_TAG=bench-quick
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

out=target/bench-quick
while [ $# -gt 0 ]; do
    case "$1" in
    --out) need_value $# "$1"; out=$2; shift 2 ;;
    *) help_or_unknown "$1" ;;
    esac
done
[ -f .runtime/env.sh ] || die "no .runtime/env.sh (scripts/setup.sh --opencl first)"
# shellcheck disable=SC1091
. .runtime/env.sh
cargo build --release -q --bin kf >&2
rm -rf "$out"
mkdir -p "$out"

timings=()
failed=()
# quick NAME COMMAND...: runs one quick form with its output under a heading, and records its
# time and whether it passed.
quick() {
    local name=$1 started status
    shift
    echo
    echo "== $name: $*"
    started=$(date +%s.%N)
    status=0
    "$@" || status=$?
    timings+=("$name $(echo "$(date +%s.%N) - $started" | bc -l)")
    [ "$status" = 0 ] || failed+=("$name (exit status $status)")
}

quick bench-vs-kernel-tuner scripts/bench-vs-kernel-tuner.sh --quick --out "$out/kt"

# A device fact missing from the translation must stop the Kernel Tuner side with its name.
missing_fact() {
    local facts="$out/kt/facts-without-l2.json" log="$out/kt/missing-fact.log" status=0
    [ -f "$out/kt/seed_1/kf.json" ] || die "the quick side-by-side left no kf.json"
    python3 - "$out/kt/seed_1/kf.json" "$facts" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
del summary["device_symbols"]["l2_cache_bytes"]
json.dump(summary, open(sys.argv[2], "w"))
PY
    target/kt-venv/bin/python scripts/kt_side_by_side.py tune \
        --manifest "$out/kt/seed_1/kernel.toml" --size 256 --facts "$facts" --budget 1 \
        >"$log" 2>&1 || status=$?
    cat "$log"
    [ "$status" = 3 ] && grep -q "'l2_cache_bytes'" "$log" ||
        { echo "expected exit status 3 naming l2_cache_bytes, got $status" >&2; return 1; }
    echo "a missing device fact stops the translation with its name: as it should"
}
quick missing-fact missing_fact
quick sub-space target/kt-venv/bin/python scripts/kt_side_by_side.py subspace \
    --manifest tuning-spaces/manifests/gemm_blocked_kt.toml \
    --template kf-mutate/templates/gemm_blocked.toml
quick bench-landscapes-vs-kt scripts/bench-landscapes-vs-kt.sh --quick --out "$out/landscapes"
quick bench-search scripts/bench-search.sh --quick --out "$out/search"
quick bench-sycl-vs-opencl scripts/bench-sycl-vs-opencl.sh --quick --out "$out/sycl"
quick bench-matmul-family scripts/bench-matmul-family.sh --quick --out "$out/matmul"
quick bench-matmul-family-epilogue scripts/bench-matmul-family.sh --quick --epilogue \
    --out "$out/matmul-epilogue"
quick kernelbench-level2 scripts/kernelbench-level2.sh --quick \
    tests/data/kernelbench_level2/vendor "$out/level2"
quick kernelbench-suite scripts/kernelbench-suite.sh --quick --out "$out/suite"
quick kernelbench-coverage scripts/kernelbench-coverage.sh --quick --out "$out/coverage"
quick bench-own-operator scripts/bench-own-operator.sh --quick --out "$out/own-operator"

echo
echo "| quick form | seconds |"
echo "|---|---|"
for t in "${timings[@]}"; do
    printf '| %s | %.1f |\n' "${t% *}" "${t##* }"
done
if [ ${#failed[@]} -gt 0 ]; then
    die "failed: ${failed[*]}"
fi
