#!/usr/bin/env bash
# The step's context copied by a kernel instead of a copy-engine node (bench/experiments/host_copy_kernel.patch;
# forty-fourth session, written without a card). One lent-card call from the repository root, carry [".whl"], logs
# under $OUT (~7 minutes warm): (1) the native host's GPU tests on the patched tree (the native host, whose cuda
# device the patch changes, must repeat the Python host bit for bit, at 1, 2 and 3 steps a launch); (2) tiny's and
# small's step A/B (schedule_ab.py, 3 rounds) of this tree against the patched one; (3) tiny's timeline on both
# trees, small's on the patched one while time is left (the boundary: the first kernel had started 14-27 us after
# the copy ended).
set -u
source "$(dirname "$0")/card_env.sh"
tar -xJf .whl/timeline.tar.xz -C .  # .timeline/: copied into the patched tree
variant hc
(cd /tmp/hc && patch -s -p1 < bench/experiments/host_copy_kernel.patch) || exit 1
(cd /tmp/hc && PYTHONPATH=/tmp/site:/tmp/hc timeout 200 python3 -m pytest -q -s -m gpu tests/gpu/test_native_gpu.py \
    -p no:cacheprovider -k "several_steps or repeats_the_python" > "$OUT/tests.log" 2>&1)
grep -E "same losses|native vs python|passed|failed|Error" "$OUT/tests.log" | tail -6
for model in tiny small; do
    echo "== schedule_ab $model"
    AB_ROUNDS=3 timeout 150 python3 bench/experiments/schedule_ab.py "$OUT/ab-$model" $model 30 base= \
        copykernel=tree=/tmp/hc 2>&1 | tee "$OUT/ab-$model.log" | grep -E "^round|rror|Traceback"
    rm -rf "$OUT/ab-$model"/*/
done
# (3) timelines: tiny on both trees (its step boundary against its ~150 us period), then small on the patched one
mkdir -p "$OUT/base" "$OUT/copykernel"
timeout 90 python3 bench/timeline.py --models tiny --out "$OUT/base" > "$OUT/base/timeline.log" 2>&1
left=$((570 - SECONDS))
echo "== timelines on the patched tree ($left s left)"
[ $left -gt 60 ] && (cd /tmp/hc && PYTHONPATH=/tmp/site:/tmp/hc timeout $((left - 10)) python3 bench/timeline.py \
    --models tiny,small --out "$OUT/copykernel" > "$OUT/copykernel/timeline.log" 2>&1)
grep -h "^# Step\|^Median\|boundary" "$OUT"/base/timeline-*.md "$OUT"/copykernel/timeline-*.md
