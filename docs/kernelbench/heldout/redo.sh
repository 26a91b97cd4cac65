#!/usr/bin/env bash
# Re-creates the eight held-out KernelBench level-1 tasks of docs/kernelbench/heldout.md in
# OUT (default /tmp/heldout): each problem imported by the documented command at the sizes
# given here, with the naive kernel of this folder as its baseline (and, where the NumPy
# stand-in for torch cannot run the problem, the NumPy reference of this folder).
# Usage: docs/kernelbench/heldout/redo.sh [OUT] [KERNELBENCH_LEVEL1_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-/tmp/heldout}"
level1="${2:-$here/../../../../shared/kernelbench/level1}"
kf="${KF:-$here/../../../target/release/kf}"
mkdir -p "$out/src" "$out/tasks"
while read -r task sizes; do
    cp "$level1/$task.py" "$out/src/"
    mkdir -p "$out/tasks/$task"
    # A hand-written NumPy reference, where the problem needs one.
    cp "$here/$task/"*_ref.py "$out/tasks/$task/" 2>/dev/null || true
    "$kf" task import-kernelbench "$out/src/$task.py" --out "$out/tasks/$task" --size "$sizes"
    cp "$here/$task/naive.cl" "$here/$task/naive.toml" "$out/tasks/$task/"
    grep -q '^\[baseline\]' "$out/tasks/$task/task.toml" ||
        printf '\n[baseline]\nkernel = "naive.toml"\n' >>"$out/tasks/$task/task.toml"
done <<'LIST'
22_Tanh batch_size=64,dim=8192
31_ELU batch_size=64,dim=16384
48_Mean_reduction_over_a_dimension batch_size=16,dim1=256,dim2=255
53_Min_reduction_over_a_dimension batch_size=16,dim1=256,dim2=255
39_L2Norm_ batch_size=64,dim=8192
24_LogSoftmax batch_size=64,dim=8192
42_Max_Pooling_2D batch_size=4,channels=8,height=128,width=128
92_cumsum_exclusive batch_size=64,input_shape_0=8192
LIST
echo "now: $kf bench kernelbench --tasks-dir $out/tasks --evaluations 12 --out $out/run"
