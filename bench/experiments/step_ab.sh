#!/usr/bin/env bash
# A/B of the training step between two trees on one card, alternating so that clock drift shows: A is this tree with
# DIFF reversed (e.g. `git diff main > change.diff` beside a change, carried to the card as an untracked file), B this
# tree as it is. bench/train_gpu.py without a peer; each run's JSON under $OUT/A1, B1, A2, ... and its step line here,
# then each run's first and last losses (a change that keeps the bits keeps them equal: both trees train on the
# first run's corpus).
#     bash bench/experiments/step_ab.sh DIFF [models (small)] [rounds (2)]     (from the root, on the card, $OUT set)
set -euo pipefail
diff=$(realpath "$1") models=${2:-small} rounds=${3:-2} here=$PWD
other=$(mktemp -d)
cp -r "$here/." "$other/" && (cd "$other" && patch -s -R -p1 < "$diff")
# one corpus for both trees (train_gpu.py's default is the tree's own sources, which a .py change alters)
export BENCH_CORPUS=$(mktemp -d)/corpus.txt
for i in $(seq "$rounds"); do
    for tree in A B; do
        dir=$([ "$tree" = A ] && echo "$other" || echo "$here")
        (cd "$dir" && PYTHONPATH="/tmp/site:$dir" timeout 300 python3 bench/train_gpu.py --models "$models" --steps 30 \
            --peer-modes "" --out "$OUT/$tree$i" 2>&1 | grep -E "batch" | sed "s/^/$tree$i /")
    done
done
python3 - "$OUT" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("[AB][0-9]*/train_gpu-*.json")):
    for model, m in json.loads(f.read_text())["models"].items():
        print(f.parent.name, model, "losses first, last:", m["losses_first_last"])
PY
