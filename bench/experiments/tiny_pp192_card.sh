#!/usr/bin/env bash
# Did the 128 x 192 ping-pong (bbea159) cost tiny? The forty-sixth session's bench gave tiny 0.159 ms against the
# forty-fourth's 0.151 on another H100; tiny takes no 128 x 192 tile, but its matmul kernels' registers rose (160 ->
# 168, 157 -> 168) with mm_load_elementwise inlined. One lent-card call from the root, carry [".whl"] (~3 minutes
# warm): tiny's step A/B (schedule_ab.py, 5 rounds) between this tree, it without matmul_pingpong192.patch, and it
# with mm_tile_grouped_loads.patch (mm_tile's two operand loads under one test of vec, so that the inlined
# element-wise loads no longer sit between A's and B's 16-byte copies in the k-loop: what the SASS showed, no card);
# then small's, 2 rounds, base against this tree, as a check of the same A/B.
set -u
source "$(dirname "$0")/card_env.sh"
unpatched bench/experiments/matmul_pingpong192.patch || exit 1
variant grouped && (cd /tmp/grouped && patch -s -p1 < bench/experiments/mm_tile_grouped_loads.patch) || exit 1
AB_ROUNDS=5 timeout 240 python3 bench/experiments/schedule_ab.py "$OUT/ab-tiny" tiny 60 base=tree=/tmp/base pp192= \
    grouped=tree=/tmp/grouped 2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-tiny.log"
AB_ROUNDS=2 timeout 150 python3 bench/experiments/schedule_ab.py "$OUT/ab-small" small 30 base=tree=/tmp/base \
    pp192= 2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-small.log"
rm -rf "$OUT/ab-tiny" "$OUT/ab-small"
