#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of untrusted input, with libFuzzer on the stable
# toolchain (no nightly, no cargo-fuzz): the targets in fuzz/ are built with the
# sanitizer-coverage LLVM passes through plain RUSTFLAGS, and libFuzzer's runtime comes from the
# libfuzzer-sys crate (pinned in fuzz/Cargo.lock; needs a C++ compiler, g++ or clang++).
#
#   scripts/fuzz.sh --list                 the targets
#   scripts/fuzz.sh --build                build the targets only
#   scripts/fuzz.sh TARGET MINUTES         build, then fuzz TARGET for MINUTES (may be fractional)
#   scripts/fuzz.sh --all SECONDS          build, then fuzz every target for SECONDS each (CI)
#   scripts/fuzz.sh --repro TARGET FILE... run TARGET once on each FILE (a crash artifact)
#
# Each run starts from the committed seeds (fuzz/corpus/TARGET) plus what earlier local runs
# found (fuzz/target/corpus/TARGET, not committed), and prints the number of executions and
# any findings. A finding (panic, abort, stack overflow, an input slower than TIMEOUT seconds,
# or more than RSS_MB of memory) stops the run; libFuzzer writes the input to
# fuzz/artifacts/TARGET/ and the script exits non-zero. Reproduce it with --repro, then turn it
# into a regression test in the owning crate.
#
# Environment: FUZZ_TIMEOUT (seconds per input, default 10), FUZZ_RSS_MB (default 2048),
# FUZZ_JOBS (cargo build jobs), TMPDIR (the rundir target's scratch directory; /dev/shm when
# unset and available).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FUZZ="$ROOT/fuzz"
TARGETS=(manifest expr llm_reply kt_cache t1 rundir taskfile chat_reply chat_stream dist_job dist_result dist_question)
# Differential targets: clang's preprocessor is their oracle (kf_fuzz::ORACLE_TARGETS). --all
# runs them where clang is installed (CI installs it) and says so where it is not.
ORACLE_TARGETS=(host_access_oracle)
TIMEOUT=${FUZZ_TIMEOUT:-10}
RSS_MB=${FUZZ_RSS_MB:-2048}
# The largest input; each target also ignores longer inputs itself (kf_fuzz::MAX_INPUT).
MAX_LEN=65536

usage() {
    sed -n '6,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

is_target() {
    local t
    for t in "${TARGETS[@]}" "${ORACLE_TARGETS[@]}"; do
        [[ $t == "$1" ]] && return 0
    done
    return 1
}

host_triple() {
    rustc -vV | sed -n 's/^host: //p'
}

build() {
    local triple
    triple=$(host_triple)
    # The flags cargo-fuzz passes, minus the nightly-only ones (-Z sanitizer, -Z build-std):
    # edge coverage with inline 8-bit counters and a PC table for libFuzzer, comparison tracing
    # for its value profile, and `cfg(fuzzing)`. --target keeps the flags off build scripts and
    # proc macros.
    local flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
    flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
    flags+=" -Cllvm-args=-sanitizer-coverage-pc-table"
    flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
    echo "fuzz.sh: building the targets ($triple)" >&2
    local start=$SECONDS
    RUSTFLAGS="$flags" cargo build --release --locked --bins \
        --manifest-path "$FUZZ/Cargo.toml" --target-dir "$FUZZ/target" --target "$triple" \
        ${FUZZ_JOBS:+--jobs "$FUZZ_JOBS"} >&2
    echo "fuzz.sh: built in $((SECONDS - start)) s" >&2
    BIN_DIR="$FUZZ/target/$triple/release"
}

scratch() {
    if [[ -z ${TMPDIR:-} && -d /dev/shm && -w /dev/shm ]]; then
        export TMPDIR=/dev/shm
    fi
}

# fuzz TARGET SECONDS: prints one summary line "TARGET SECONDS EXECUTIONS FINDINGS".
fuzz_one() {
    local target=$1 seconds=$2
    local work="$FUZZ/target/corpus/$target" artifacts="$FUZZ/artifacts/$target"
    local log="$FUZZ/target/logs/$target.log"
    mkdir -p "$work" "$artifacts" "$(dirname "$log")"
    local before
    before=$(find "$artifacts" -type f | wc -l)
    local status=0
    # The first corpus folder receives new inputs; the committed seeds are only read.
    "$BIN_DIR/$target" "$work" "$FUZZ/corpus/$target" \
        -max_total_time="$seconds" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
        -malloc_limit_mb="$RSS_MB" -max_len="$MAX_LEN" -print_final_stats=1 \
        -artifact_prefix="$artifacts/" >"$log" 2>&1 || status=$?
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [[ -z $execs ]]; then
        execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
    fi
    local after
    after=$(find "$artifacts" -type f | wc -l)
    local findings=$((after - before))
    if ((status != 0 && findings == 0)); then
        findings=1
    fi
    if ((findings > 0)); then
        echo "fuzz.sh: $target: FINDING (exit status $status); log: $log" >&2
        grep -E '^(==[0-9]+== ERROR|thread .* panicked|SUMMARY|artifact_prefix|Test unit written)' \
            "$log" >&2 || tail -20 "$log" >&2
        grep -A3 'panicked' "$log" | head -8 >&2 || true
    fi
    echo "$target $seconds ${execs:-0} $findings"
}

summary_header() {
    printf '%-19s %8s %12s %8s\n' target seconds executions findings
}

summary_line() {
    printf '%-19s %8s %12s %8s\n' "$@"
}

[[ $# -ge 1 ]] || usage
case $1 in
--list)
    printf '%s\n' "${TARGETS[@]}" "${ORACLE_TARGETS[@]}"
    ;;
--build)
    build
    ;;
--all)
    [[ $# -eq 2 && $2 =~ ^[0-9]+$ && $2 -gt 0 ]] || usage
    scratch
    build
    failed=0
    results=()
    all=("${TARGETS[@]}")
    if command -v "${KF_ORACLE_CLANG:-clang}" >/dev/null; then
        all+=("${ORACLE_TARGETS[@]}")
    else
        echo "fuzz.sh: no clang: the differential targets (${ORACLE_TARGETS[*]}) do not run" >&2
    fi
    for t in "${all[@]}"; do
        line=$(fuzz_one "$t" "$2")
        results+=("$line")
        [[ ${line##* } == 0 ]] || failed=1
    done
    summary_header
    for line in "${results[@]}"; do
        # shellcheck disable=SC2086
        summary_line $line
    done
    exit $failed
    ;;
--repro)
    [[ $# -ge 3 ]] && is_target "$2" || usage
    scratch
    build
    target=$2
    shift 2
    exec "$BIN_DIR/$target" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
        -malloc_limit_mb="$RSS_MB" "$@"
    ;;
-*)
    usage
    ;;
*)
    [[ $# -eq 2 ]] && is_target "$1" || {
        echo "fuzz.sh: unknown target '$1' (scripts/fuzz.sh --list)" >&2
        exit 2
    }
    seconds=$(awk -v m="$2" 'BEGIN { if (m + 0 <= 0) exit 1; printf "%d", m * 60 + 0.5 }') ||
        usage
    scratch
    build
    line=$(fuzz_one "$1" "$seconds")
    summary_header
    # shellcheck disable=SC2086
    summary_line $line
    [[ ${line##* } == 0 ]]
    ;;
esac
