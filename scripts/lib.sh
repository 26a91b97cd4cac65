# Shell functions shared by the scripts in this folder (setup.sh, gpu-check.sh, llm-server.sh,
# dist-servers.sh, the bench-*.sh scripts). Not run on its own: a script sets LOG_TAG (the
# prefix of its messages) and, where an error exits with another status than 1, DIE_STATUS,
# then sources this file:
#
#   LOG_TAG=setup
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# It sets ROOT (the checkout), SCRIPT (the script that sourced it), RUNTIME (the git-ignored
# runtime folder, $ROOT/.runtime) and PYTHON (the interpreter virtual environments are made
# with: $PYTHON, or python3).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT="${BASH_SOURCE[1]}"
RUNTIME="$ROOT/.runtime"
PYTHON="${PYTHON:-python3}"

log() { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2; }
warn() { printf '[%s] WARNING: %s\n' "$LOG_TAG" "$*" >&2; }
die() {
    printf '[%s] ERROR: %s\n' "$LOG_TAG" "$*" >&2
    exit "${DIE_STATUS:-1}"
}

# Prints the script's header comment: from line 2 up to its `set -…` line, without the `# `.
usage() { sed -n '2,/^set -[eu]/p' "$SCRIPT" | sed -e '$d' -e 's/^# \{0,1\}//'; }

# need_value ARGC OPTION: dies unless the option at hand has a value after it ($# >= 2).
need_value() { [ "$1" -ge 2 ] || die "$2 needs a value"; }

# help_or_unknown ARG: the last case of an option loop: -h/--help prints the usage and exits 0,
# anything else dies as an unknown option.
help_or_unknown() {
    case "$1" in
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
}

# write_file FILE COMMAND...: runs COMMAND (stdin passes through) and puts what it printed in
# FILE by way of FILE.tmp, so that FILE is replaced whole, and only when COMMAND succeeds.
write_file() {
    local file="$1"
    shift
    "$@" >"$file.tmp" || {
        local status=$?
        rm -f "$file.tmp"
        return "$status"
    }
    mv -f "$file.tmp" "$file"
}

# search_examples gemm|softmax|both: prints the names of the shipped search examples a --task
# value names (dies on another value), after building them (cargo rebuilds only what changed,
# so a benchmark never times a binary older than the checkout).
search_examples() {
    local names example
    case "$1" in
    gemm | softmax) names=$1 ;;
    both) names="gemm softmax" ;;
    *) die "--task takes gemm, softmax or both, not '$1'" ;;
    esac
    for example in $names; do
        (cd "$ROOT" && cargo build --release --example "$example") >&2
    done
    echo "$names"
}

# kt_venv DIR: makes DIR a virtual environment with Kernel Tuner and what the Kernel Tuner
# benchmarks need (pyopencl for live tuning, scikit-learn for its bayes_opt), unless DIR already
# has exactly these packages (a marker file names them), so that the bench scripts can share one.
KT_PACKAGES="kernel_tuner==1.5.0 pyopencl numpy scikit-learn"
kt_venv() {
    local dir="$1"
    if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.kf-kt-packages" 2>/dev/null)" = "$KT_PACKAGES" ]; then
        return 0
    fi
    [ -x "$dir/bin/python" ] || "$PYTHON" -m venv "$dir" || die "could not create $dir"
    # shellcheck disable=SC2086 # the package list is split on purpose
    "$dir/bin/pip" install -q $KT_PACKAGES >&2 || die "pip could not install $KT_PACKAGES into $dir"
    printf '%s\n' "$KT_PACKAGES" >"$dir/.kf-kt-packages"
}
