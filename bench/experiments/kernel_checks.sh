#!/usr/bin/env bash
# The card's checks of a matmul kernel change in one device call, each part's log under $OUT and its tail here:
# branch_checks.sh on the two cubins (matmul_forward_ab.py's times and same bits, the matmul tensor-core tests,
# memcheck and racecheck at SHAPES: test ids joined by "or", e.g. "16384-1536-384 or 8999-200-328"), then the
# training step A/B (step_ab.sh DIFF small 2). From the root of the changed tree on the card, $OUT set, the carried
# wheels installed (docs/notes/gpu-speed.md); ~8 minutes.
#     bash bench/experiments/kernel_checks.sh old.cubin new.cubin change.diff "SHAPES"
set -uo pipefail
old=$1 new=$2 diff=$3 shapes=$4
TOOLS="memcheck racecheck" bash "$(dirname "$0")/branch_checks.sh" "$shapes" "$old" "$new"
timeout 300 bash bench/experiments/step_ab.sh "$diff" small 2 > "$OUT/step_ab.txt" 2>&1
cat "$OUT/step_ab.txt"
