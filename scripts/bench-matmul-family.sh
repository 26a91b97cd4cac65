#!/usr/bin/env bash
# The matrix-product family against the built-in GEMM search: the KernelBench task
# 1_Square_matrix_multiplication_ (a task file whose [family] binds the GEMM templates to its
# interface) at N = SIZE and the built-in gemm task at SIZE³, with the same number of candidates,
# one after the other; prints each run's best GFLOP/s, their ratio, and the machine's load and
# processor before and after each run.
#
#   scripts/bench-matmul-family.sh [--size 1024] [--evaluations 30] [--out target/bench-matmul-family]
#       [--epilogue] [--quick] [-- EXTRA kf search ARGUMENTS]
#
# --epilogue compares a GEMM followed by a ReLU instead (issue 60): the problem
# tests/data/gemm_relu/Gemm_ReLU.py (nn.Linear then torch.relu, in KernelBench's form) imported
# by `kf task import-kernelbench` at batch_size = SIZE / 4, in_features = out_features = SIZE
# (the importer reads the product and its epilogue from forward()'s trace), against the gemm
# example at M = SIZE / 4, N = K = SIZE. Both runs count 2·M·N·K operations.
#
# --quick is the form CI runs (under a minute, issue 62): both searches at 128 with 3
# candidates and a 20-second limit; options after it override its values. The script fails
# when either run leaves no report or finds no correct kernel.
# Needs the release kf binary (built here if missing) and the OpenCL runtime with NumPy
# (scripts/setup.sh). Run folders go under --out (git-ignored).
set -euo pipefail
LOG_TAG=bench-matmul-family
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

size=1024 evaluations=30 out=target/bench-matmul-family extra=() epilogue=0
while [ $# -gt 0 ]; do
    case "$1" in
        --size | --evaluations | --out) need_value $# "$1" ;;
    esac
    case "$1" in
        --quick) size=128 evaluations=3 extra=(--time 20); shift ;;
        --epilogue) epilogue=1; shift ;;
        --size) size=$2; shift 2 ;;
        --evaluations) evaluations=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) help_or_unknown "$1" ;;
    esac
done

[ -x target/release/kf ] || cargo build --release -q --bin kf >&2
model="$(LC_ALL=C lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)"
load() { cut -d' ' -f1-3 /proc/loadavg; }
best() {
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r.get("best_gflops") or 0, r.get("evaluations"))' "$1/report.json" ||
        die "$1 has no readable report.json"
}
mkdir -p "$out"
rm -rf "$out/kernelbench" "$out/gemm"

if [ "$epilogue" = 1 ]; then
    rows=$((size / 4))
    rm -rf "$out/gemm_relu_task"
    target/release/kf task import-kernelbench tests/data/gemm_relu/Gemm_ReLU.py \
        --out "$out/gemm_relu_task" --size "batch_size=$rows,in_features=$size,out_features=$size" >&2
    grep -q '^epilogue = ' "$out/gemm_relu_task/task.toml" ||
        die "the import wrote no matmul epilogue for Gemm_ReLU"
    task_args=(--task-file "$out/gemm_relu_task/task.toml")
    task_label="Gemm_ReLU $rows x $size -> $size (imported, matmul + epilogue)"
    gemm_size="M=$rows,N=$size,K=$size"
    gemm_label="gemm example M=$rows, N=K=$size (built-in task)"
else
    task_args=(--task-file tasks/kernelbench/1_Square_matrix_multiplication_/task.toml --size "N=$size")
    task_label="1_Square_matrix_multiplication_ N=$size (task file, family matmul)"
    gemm_size="M=$size,N=$size,K=$size"
    gemm_label="gemm example $size³ (built-in task)"
fi

echo "machine: $model; load before the task-file run: $(load)" >&2
target/release/kf search "${task_args[@]}" \
    --evaluations "$evaluations" --out "$out/kernelbench" "${extra[@]}" >&2
kb_load="$(load)"
echo "load before the gemm run: $kb_load" >&2
target/release/kf search --task gemm --size "$gemm_size" \
    --evaluations "$evaluations" --out "$out/gemm" "${extra[@]}" >&2
gemm_load="$(load)"

kb_best="$(best "$out/kernelbench")"
gemm_best="$(best "$out/gemm")"
read -r kb_gflops kb_evals <<<"$kb_best"
read -r gemm_gflops gemm_evals <<<"$gemm_best"
echo "| run | candidates | best GFLOP/s | load after |"
echo "|---|---|---|---|"
echo "| $task_label | $kb_evals | $kb_gflops | $kb_load |"
echo "| $gemm_label | $gemm_evals | $gemm_gflops | $gemm_load |"
python3 -c 'import sys; kb, g = map(float, sys.argv[1:]); print(f"ratio task file / gemm = {kb / g:.2f}" if g > 0 else "gemm found no kernel")' "$kb_gflops" "$gemm_gflops"
echo "processor: $model"
python3 -c 'import sys; sys.exit(0 if min(map(float, sys.argv[1:])) > 0 else 1)' "$kb_gflops" "$gemm_gflops" ||
    die "a run found no correct kernel"
