#!/usr/bin/env bash
# Why matmul_forward_residual_layernorm's step lost 0.22 ms where its launches alone lost ~0.03 (forty-ninth
# session; the backward's commands are the same in both plans, the forward's differ in the fused launches and in
# four new programmatic edges: gelu -> fused, fused -> gelu, fused -> qkv, fused -> lm head). One lent-card call
# from the root with the patch applied, carry [".whl"] (~7 minutes warm): (1) residual_layernorm_phases.py (where a
# block's time goes); (2) small's step A/B (2 rounds) of the tree without the patch, the patched one, and the patched
# one with the fused launches' edges not programmatic (every 128-block grid's: only those at small); (3) small's
# timeline (bench/timeline.py: each kernel's in-graph time) on the patched tree, while time is left.
set -u
source "$(dirname "$0")/card_env.sh"
tar -xJf .whl/timeline.tar.xz -C .
timeout 150 python3 bench/experiments/residual_layernorm_phases.py 2>&1 | tee "$OUT/phases.txt"
unpatched bench/experiments/residual_layernorm.patch || exit 1
not_programmatic nopdl "[128, 1, 1]"
AB_ROUNDS=2 timeout 240 python3 bench/experiments/schedule_ab.py "$OUT/ab-small" small 30 base=tree=/tmp/base fused= \
    nopdl=tree=/tmp/nopdl 2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-small.log"
rm -rf "$OUT/ab-small"
mkdir -p "$OUT/fused"
left=$((575 - SECONDS))
echo "== timeline ($left s left)"
[ $left -gt 50 ] && timeout $left python3 bench/timeline.py --models small --out "$OUT/fused" \
    > "$OUT/fused/timeline.log" 2>&1
rm -f "$OUT"/*/*.csv*
tail -3 "$OUT"/fused/timeline.log
grep -E "^\| matmul|^\| residual|^Median" "$OUT"/fused/timeline-*.md
