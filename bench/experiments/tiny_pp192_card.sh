#!/usr/bin/env bash
# Did the 128 x 192 ping-pong (bbea159) cost tiny? The forty-sixth session's bench gave tiny 0.159 ms against the
# forty-fourth's 0.151 on another H100; tiny takes no 128 x 192 tile, but its matmul kernels' registers rose (160 ->
# 168, 157 -> 168) with mm_load_elementwise inlined. One lent-card call from the root, carry [".whl"] (~3 minutes
# warm): tiny's step A/B (schedule_ab.py, 5 rounds) between this tree and it without matmul_pingpong192.patch, then
# small's, 2 rounds, as a check of the same A/B.
set -u
source "$(dirname "$0")/card_env.sh"
root=$PWD
variant base && (cd /tmp/base && patch -s -R -p1 < "$root/bench/experiments/matmul_pingpong192.patch") || exit 1
AB_ROUNDS=5 timeout 200 python3 bench/experiments/schedule_ab.py "$OUT/ab-tiny" tiny 60 base=tree=/tmp/base pp192= \
    2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-tiny.log"
AB_ROUNDS=2 timeout 150 python3 bench/experiments/schedule_ab.py "$OUT/ab-small" small 30 base=tree=/tmp/base \
    pp192= 2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-small.log"
rm -rf "$OUT/ab-tiny" "$OUT/ab-small"
