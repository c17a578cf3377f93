#!/usr/bin/env bash
# The context copy as a kernel (host_copy_kernel.patch) at several steps a launch (forty-fifth session): at one step
# a launch it took ~8 us off the boundary and nothing off the step (bench/results/host_copy_kernel-2026-12-06-h100.txt);
# inside a K-step graph the copy-engine node's ~25 us wait before the next kernel is what K had left. One lent-card
# call from the repository root, carry [".whl"], logs under $OUT (~5 minutes warm): tiny's and small's A/B of the
# base and the patched tree at 1, 2 and 4 steps a launch (schedule_ab.py, 24 steps, 3 rounds).
set -u
source "$(dirname "$0")/card_env.sh"
variant hc
(cd /tmp/hc && patch -s -p1 < bench/experiments/host_copy_kernel.patch) || exit 1
for model in tiny small; do
    echo "== schedule_ab $model"
    AB_ROUNDS=3 timeout 270 python3 bench/experiments/schedule_ab.py "$OUT/ab-$model" $model 24 base= \
        base2=STEPS_PER_LAUNCH=2 copy=tree=/tmp/hc copy2=tree=/tmp/hc,STEPS_PER_LAUNCH=2 \
        copy4=tree=/tmp/hc,STEPS_PER_LAUNCH=4 2>&1 | tee "$OUT/ab-$model.log" | grep -E "^round|rror|Traceback"
    rm -rf "$OUT/ab-$model"/*/ "$OUT/ab-$model/corpus.txt"
done
