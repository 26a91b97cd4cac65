#!/usr/bin/env bash
# Imports every KernelBench level-2 problem in DIR (default ../shared/kernelbench/level2) at
# small sizes (--max-size, default 8) into OUT (default runs/kernelbench-level2), evaluates each
# generated naive kernel against the reference, and prints one line per problem:
#   <problem> | import: ok/<reason> | eval: <status> <diagnostics>
# The task folders it leaves are what `kf bench kernelbench --tasks-dir OUT` searches.
# Usage: scripts/kernelbench-level2.sh [DIR] [OUT] [MAX_SIZE]
set -u
dir=${1:-../shared/kernelbench/level2}
out=${2:-runs/kernelbench-level2}
max=${3:-8}
kf=${KF:-target/debug/kf}
mkdir -p "$out"
for problem in "$dir"/*.py; do
    stem=$(basename "$problem" .py)
    log=$("$kf" task import-kernelbench "$problem" --out "$out/$stem" --max-size "$max" 2>&1)
    if [ $? -ne 0 ]; then
        rm -rf "${out:?}/$stem"
        echo "$stem | import: $(echo "$log" | tail -1 | cut -c1-300)"
        continue
    fi
    verdict=$("$kf" eval --task-file "$out/$stem/task.toml" --kernel "$out/$stem/naive.toml" --json 2>&1 |
        python3 -c 'import json,sys
t = sys.stdin.read()
try:
    j = json.loads(t)
    print(j["status"], j.get("diagnostics", "")[:300].replace("\n", " "))
except Exception:
    print("error", t[-300:].replace("\n", " "))')
    echo "$stem | import: ok | eval: $verdict"
done
