#!/usr/bin/env bash
# (forty-ninth session) Two questions in one lent-card call from the root, residual_layernorm.patch applied in the
# tree, carry [".whl"] (~6 minutes warm): (1) residual_layernorm_phases.py: where a block of the fused kernel spends
# its time; (2) whether today's programmatic edges pay: the fused kernel's four new edges cost small ~70 us a step
# (bench/results/residual_layernorm-2026-12-06-h100.txt), so small's and tiny's step A/B (schedule_ab.py, 2 rounds)
# of the tree without the patch (base: geometry.programmatic's rule), that tree with no programmatic edge (none), and
# with every launch-after-launch edge programmatic (every: PROGRAMMATIC_BLOCKS_PER_SM unbounded).
set -u
source "$(dirname "$0")/card_env.sh"
timeout 120 python3 bench/experiments/residual_layernorm_phases.py 2>&1 | tee "$OUT/phases.txt"
unpatched bench/experiments/residual_layernorm.patch || exit 1
for name in none every; do
    rm -rf "/tmp/$name" && cp -r /tmp/base "/tmp/$name"
done
sed -i 's/^PROGRAMMATIC_ARCHS = ("sm_90", "sm_121")/PROGRAMMATIC_ARCHS = ()/' /tmp/none/coppelius/formats/geometry.py
sed -i 's/^PROGRAMMATIC_BLOCKS_PER_SM = 4 /PROGRAMMATIC_BLOCKS_PER_SM = 10**6 /' /tmp/every/coppelius/formats/geometry.py
grep -h "^PROGRAMMATIC" /tmp/none/coppelius/formats/geometry.py /tmp/every/coppelius/formats/geometry.py
for model in small tiny; do
    echo "== $model ($SECONDS s)"
    AB_ROUNDS=2 timeout $((450 - SECONDS)) python3 bench/experiments/schedule_ab.py "$OUT/ab-$model" $model 30 \
        base=tree=/tmp/base none=tree=/tmp/none every=tree=/tmp/every 2>&1 | grep -E "^round|rror|Traceback" |
        tee "$OUT/ab-$model.log"
    rm -rf "$OUT/ab-$model"
done
