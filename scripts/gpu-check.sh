#!/usr/bin/env bash
# KernelFoundry-rs: run the CUDA checks on a GPU machine in one go, within a time limit.
#
#   scripts/gpu-check.sh                       # build with cargo here, then run every check
#   scripts/gpu-check.sh --make-bundle DIR     # on a build machine: put prebuilt test programs,
#                                              # `kf` and a compressed NVRTC 12 into DIR
#   scripts/gpu-check.sh --bundle DIR          # on a GPU machine without cargo or NVRTC 12:
#                                              # run the checks from DIR
#
# Checks, in order (each with its own time limit, all within --timeout):
#   conformance   the kf-core backend conformance suite on the GPU (tests/conformance.rs)
#   evaluator     kf-eval verifies and times the CUDA seed kernels (tests/evaluator.rs)
#   nvrtc         compilation and resource reporting (tests/nvrtc.rs)
#   cuda_templates  kf-mutate's CUDA templates: every structure compiled with its resources
#                 reported, then run and verified by the evaluator (kf-mutate/tests/cuda_templates.rs)
#   eval-naive    kf eval --backend cuda of kf-eval/kernels/cuda/gemm_naive.toml
#   eval-tiled    kf eval --backend cuda of kf-eval/kernels/cuda/gemm_tiled.toml
#                 (both run in confined workers, kf_eval::confine: they also check that the
#                 GPU's device nodes, /dev/nvidia*, stay open to a Landlock-confined worker)
#   search        a short search with the gemm example and --backend cuda, when the example
#                 exists and takes --backend (its arguments: KF_GPU_CHECK_SEARCH_ARGS, default
#                 "--size 512 --evaluations 12 --time 150 --no-progress"); it passes when the
#                 search found a correct kernel
#
# Options:
#   --timeout SECONDS   limit for everything (default 540)
#   --out DIR           logs and summary.txt (default: $OUT when set, else target/gpu-check)
#   --size SIZES        problem sizes for kf eval (default M=1024,N=1024,K=1024)
#   --release           build with --release (cargo and --make-bundle modes)
#   --force             run even where no GPU is found (to test this script; the GPU checks
#                       then fail)
#   -h, --help          this text
#
# Where there is no NVIDIA GPU it prints "SKIPPED: ..." and exits 0. Exit status 1 when a
# check failed, 2 on a usage or setup error.
set -uo pipefail

LOG_TAG=gpu-check
DIE_STATUS=2
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT" || exit 2
TIMEOUT=540
OUT_DIR="${OUT:-$ROOT/target/gpu-check}"
SIZE="M=1024,N=1024,K=1024"
PROFILE=debug
MODE=cargo
BUNDLE=""
TESTS=(conformance evaluator nvrtc cuda_templates)
FORCE=0
BUNDLE_ARG=""

while [ $# -gt 0 ]; do
    case "$1" in
    --timeout)
        need_value $# --timeout
        TIMEOUT="$2"
        shift
        ;;
    --out)
        need_value $# --out
        OUT_DIR="$2"
        shift
        ;;
    --size)
        need_value $# --size
        SIZE="$2"
        shift
        ;;
    --release) PROFILE=release ;;
    --force) FORCE=1 ;;
    --bundle)
        [ $# -ge 2 ] || die "--bundle needs a directory"
        MODE=bundle
        BUNDLE="$2"
        shift
        ;;
    --make-bundle)
        [ $# -ge 2 ] || die "--make-bundle needs a directory"
        MODE=make-bundle
        BUNDLE="$2"
        BUNDLE_ARG="$2"
        shift
        ;;
    *) help_or_unknown "$1" ;;
    esac
    shift
done
case "$TIMEOUT" in '' | *[!0-9]*) die "--timeout takes whole seconds" ;; esac

STARTED=$(date +%s)
remaining() { echo $((TIMEOUT - ($(date +%s) - STARTED))); }

# ---------------------------------------------------------------------------------------------
# Building: test programs and `kf` with cargo.

cargo_profile_flag() { [ "$PROFILE" = release ] && echo "--release"; }

# Prints "name<TAB>path" for each test program of kf-backend-cuda and kf-mutate.
build_tests() {
    command -v cargo >/dev/null 2>&1 || die "cargo not found: use --bundle DIR with programs built elsewhere (--make-bundle)"
    # shellcheck disable=SC2046
    cargo test -p kf-backend-cuda -p kf-mutate $(cargo_profile_flag) --no-run --message-format=json 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"] + "\t" + m["executable"])
'
}

build_kf() {
    # shellcheck disable=SC2046
    cargo build --bin kf $(cargo_profile_flag) >&2 || return 1
    echo "$ROOT/target/$PROFILE/kf"
}

# Prints the path of the gemm example when this checkout has one and it builds.
build_example() {
    [ -f "$ROOT/examples/gemm.rs" ] || return 1
    # shellcheck disable=SC2046
    cargo build --example gemm $(cargo_profile_flag) >&2 || return 1
    echo "$ROOT/target/$PROFILE/examples/gemm"
}

# ---------------------------------------------------------------------------------------------
# --make-bundle: everything a GPU machine without cargo or NVRTC 12 needs, in one folder.

nvrtc_lib_dir() {
    [ -f "$ROOT/.runtime/cuda.json" ] || return 1
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lib_dir"])' "$ROOT/.runtime/cuda.json"
}

make_bundle() {
    local dir="$1"
    mkdir -p "$dir/bin" || die "cannot create $dir"
    dir="$(cd "$dir" && pwd)"
    log "building test programs and kf ($PROFILE)"
    local list name path kf example
    list="$(build_tests)" || die "building the tests failed"
    [ -n "$list" ] || die "no test programs were built"
    rm -f "$dir"/bin/*
    while IFS=$'\t' read -r name path; do
        for want in "${TESTS[@]}"; do
            [ "$name" = "$want" ] && cp -f "$path" "$dir/bin/$name"
        done
    done <<<"$list"
    kf="$(build_kf)" || die "building kf failed"
    cp -f "$kf" "$dir/bin/kf"
    if example="$(build_example)"; then
        cp -f "$example" "$dir/bin/gemm"
    fi
    # Stripped and compressed: the GPU machine gets at most 64 MiB with the checkout.
    for path in "$dir"/bin/*; do
        strip "$path" 2>/dev/null || true
        xz -T0 -6 -f "$path" || die "xz failed on $path"
    done
    local libdir
    libdir="$(nvrtc_lib_dir)" || die "no .runtime/cuda.json: run scripts/setup.sh --cuda first"
    mkdir -p "$dir/nvrtc"
    if [ ! -f "$dir/nvrtc/libnvrtc.so.12.xz" ] || [ "$libdir/libnvrtc.so.12" -nt "$dir/nvrtc/libnvrtc.so.12.xz" ]; then
        log "compressing NVRTC (about 3 minutes on 2 cores; kept for later bundles)"
        xz -T0 -6 -c "$libdir/libnvrtc.so.12" >"$dir/nvrtc/libnvrtc.so.12.xz.tmp" &&
            mv -f "$dir/nvrtc/libnvrtc.so.12.xz.tmp" "$dir/nvrtc/libnvrtc.so.12.xz" || die "xz failed"
    fi
    local builtins
    builtins="$(find "$libdir" -name 'libnvrtc-builtins.so.*' | sort | tail -n 1)"
    [ -n "$builtins" ] && xz -T0 -6 -c "$builtins" >"$dir/nvrtc/$(basename "$builtins").xz"
    local include
    include="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print((d.get("include_dirs") or [""])[0])' "$ROOT/.runtime/cuda.json")"
    if [ -n "$include" ] && [ -d "$include" ]; then
        tar -C "$include" -cJf "$dir/nvrtc/include.tar.xz" .
    fi
    ls -l "$dir"/bin "$dir"/nvrtc >&2
    log "bundle ready: $(du -sh "$dir" | cut -f1) in $dir; carry it to the GPU machine (with the" \
        "checkout) and run scripts/gpu-check.sh --bundle ${BUNDLE_ARG}"
}

# Unpacks the bundle's NVRTC into a temporary folder and points KF_CUDA_NVRTC at it.
unpack_nvrtc() {
    local dir="$1" dest="${TMPDIR:-/tmp}/kf-gpu-check-nvrtc"
    [ -f "$dir/nvrtc/libnvrtc.so.12.xz" ] || return 0
    mkdir -p "$dest/lib" "$dest/include"
    local f
    for f in "$dir"/nvrtc/*.so*.xz; do
        [ -e "$f" ] || continue
        local target
        target="$dest/lib/$(basename "${f%.xz}")"
        [ -s "$target" ] && continue
        if command -v xz >/dev/null 2>&1; then
            xz -dc "$f" >"$target.tmp"
        else
            python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$target.tmp"
        fi && mv -f "$target.tmp" "$target" || die "cannot unpack $f"
    done
    if [ -f "$dir/nvrtc/include.tar.xz" ] && [ ! -f "$dest/include/cuda_fp16.h" ]; then
        tar -C "$dest/include" -xJf "$dir/nvrtc/include.tar.xz" || log "could not unpack the CUDA headers"
    fi
    export KF_CUDA_NVRTC="$dest/lib/libnvrtc.so.12"
    log "NVRTC from the bundle: $KF_CUDA_NVRTC"
}

# Unpacks the bundle's programs into a temporary folder and prints it.
unpack_programs() {
    local dir="$1" dest="${TMPDIR:-/tmp}/kf-gpu-check-bin" f target
    mkdir -p "$dest"
    for f in "$dir"/bin/*.xz; do
        [ -e "$f" ] || continue
        target="$dest/$(basename "${f%.xz}")"
        if command -v xz >/dev/null 2>&1; then
            xz -dc "$f" >"$target"
        else
            python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$target"
        fi || die "cannot unpack $f"
        chmod +x "$target"
    done
    echo "$dest"
}

if [ "$MODE" = make-bundle ]; then
    make_bundle "$BUNDLE"
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# Is there a GPU?

gpu_reason=""
has_gpu() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        local listed
        listed="$(timeout 20 nvidia-smi -L 2>/dev/null)" || listed=""
        if printf '%s' "$listed" | grep -q '^GPU '; then
            printf '%s\n' "$listed" | sed 's/^/[gpu-check] /' >&2
            return 0
        fi
        gpu_reason="nvidia-smi lists no GPU"
    fi
    # No nvidia-smi (containers): ask the driver library directly.
    if python3 - <<'PY' 2>/dev/null; then
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
n = ctypes.c_int()
sys.exit(0 if cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0 else 1)
PY
        return 0
    fi
    [ -n "$gpu_reason" ] || gpu_reason="no nvidia-smi and no usable libcuda.so.1 (no NVIDIA driver)"
    return 1
}

if ! has_gpu && [ "$FORCE" -eq 0 ]; then
    echo "SKIPPED: no NVIDIA GPU on this machine ($gpu_reason); the CUDA checks need one." \
        "Without a GPU, 'cargo test -p kf-backend-cuda' (after scripts/setup.sh --cuda) checks compilation and resource reporting."
    exit 0
fi

mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
SUMMARY="$OUT_DIR/summary.txt"
: >"$SUMMARY"
FAILED=0

record() { # record NAME STATUS DETAIL
    printf '%-12s %-7s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY" >&2
    [ "$2" = FAIL ] && FAILED=1
    return 0
}

# run_step NAME CAP COMMAND...: runs with min(CAP, remaining) seconds, log in $OUT_DIR/NAME.log.
run_step() {
    local name="$1" cap="$2"
    shift 2
    local left
    left="$(remaining)"
    if [ "$left" -le 5 ]; then
        record "$name" SKIP "no time left (--timeout $TIMEOUT)"
        return 1
    fi
    [ "$cap" -gt "$left" ] && cap="$left"
    log "$name: $* (limit ${cap}s)"
    local t0 rc
    t0=$(date +%s)
    timeout --kill-after=5 "$cap" "$@" >"$OUT_DIR/$name.log" 2>&1
    rc=$?
    STEP_SECONDS=$(($(date +%s) - t0))
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        record "$name" FAIL "timed out after ${cap}s (see $name.log)"
        return 1
    fi
    STEP_RC=$rc
    return 0
}

export KF_REQUIRE_NVRTC=1 KF_REQUIRE_CUDA_DEVICE=1 RUST_BACKTRACE=1

declare -A TEST_BIN=()
KF_BIN=""
EXAMPLE_BIN=""
if [ "$MODE" = bundle ]; then
    [ -d "$BUNDLE/bin" ] || die "$BUNDLE/bin not found (make one with --make-bundle)"
    BUNDLE="$(cd "$BUNDLE" && pwd)"
    unpack_nvrtc "$BUNDLE"
    programs="$(unpack_programs "$BUNDLE")"
    for t in "${TESTS[@]}"; do
        [ -x "$programs/$t" ] && TEST_BIN[$t]="$programs/$t"
    done
    [ -x "$programs/kf" ] && KF_BIN="$programs/kf"
    [ -x "$programs/gemm" ] && EXAMPLE_BIN="$programs/gemm"
else
    log "building (cargo, $PROFILE)"
    if list="$(build_tests)"; then
        while IFS=$'\t' read -r name path; do
            [ -n "$name" ] && TEST_BIN[$name]="$path"
        done <<<"$list"
    fi
    KF_BIN="$(build_kf)" || KF_BIN=""
    EXAMPLE_BIN="$(build_example)" || EXAMPLE_BIN=""
fi

for t in "${TESTS[@]}"; do
    bin="${TEST_BIN[$t]:-}"
    if [ -z "$bin" ]; then
        record "$t" FAIL "test program not built"
        continue
    fi
    if run_step "$t" 240 "$bin" --nocapture --test-threads=1; then
        passed="$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed; [0-9]+ failed' "$OUT_DIR/$t.log" | tail -n 1)"
        if [ "$STEP_RC" -eq 0 ]; then
            record "$t" PASS "${passed:-ok} in ${STEP_SECONDS}s"
        else
            record "$t" FAIL "${passed:-exit $STEP_RC} (see $t.log)"
        fi
    fi
done

eval_kernel() { # eval_kernel NAME MANIFEST
    local name="$1" manifest="$2"
    if [ -z "$KF_BIN" ]; then
        record "$name" FAIL "kf not built"
        return
    fi
    if run_step "$name" 120 "$KF_BIN" eval --backend cuda --task gemm --size "$SIZE" --kernel "$manifest" --json; then
        local status
        status="$(python3 -c '
import json, sys
text = open(sys.argv[1]).read()
start = text.find("{")
try:
    d = json.loads(text[start:])
except ValueError:
    print("unparsable")
    sys.exit()
g = d.get("gflops")
s = d.get("speedup")
print(d.get("status"), d.get("device"), "%.1f GFLOP/s" % g if g else "-", "speedup %.2fx" % s if s else "")
' "$OUT_DIR/$name.log" 2>/dev/null)"
        case "$status" in
        correct*) record "$name" PASS "$status" ;;
        *) record "$name" FAIL "${status:-exit $STEP_RC} (see $name.log)" ;;
        esac
    fi
}
eval_kernel eval-naive kf-eval/kernels/cuda/gemm_naive.toml
eval_kernel eval-tiled kf-eval/kernels/cuda/gemm_tiled.toml

# A short search with the gemm example, when it exists and takes --backend.
if [ -n "$EXAMPLE_BIN" ] && "$EXAMPLE_BIN" --help 2>/dev/null | grep -q -- '--backend'; then
    # shellcheck disable=SC2206
    extra=(${KF_GPU_CHECK_SEARCH_ARGS:---size 512 --evaluations 12 --time 150 --no-progress})
    search_out="${TMPDIR:-/tmp}/kf-gpu-check-search"
    rm -rf "$search_out"
    if run_step search 200 "$EXAMPLE_BIN" --backend cuda --out "$search_out" "${extra[@]}"; then
        best="$(grep -E '^best kernel' "$OUT_DIR/search.log" | tail -n 1)"
        if [ "$STEP_RC" -eq 0 ] && [ -n "$best" ]; then
            record search PASS "in ${STEP_SECONDS}s: $best"
        elif [ "$STEP_RC" -eq 0 ]; then
            record search FAIL "no correct kernel found (does the example seed CUDA kernels for --backend cuda? see search.log)"
        else
            record search FAIL "exit $STEP_RC (see search.log)"
        fi
    fi
else
    record search SKIP "no gemm example taking --backend in this checkout"
fi

log "summary ($(($(date +%s) - STARTED))s; logs in $OUT_DIR):"
cat "$SUMMARY"
exit "$FAILED"
