#!/usr/bin/env bash
# The element-wise loads inlined only in the kernels that hold the ping-pong (matmul_forward, matmul_backward_input;
# bench/experiments/inline_pingpong_only.patch, forty-seventh session, no card yet): the gelu, statistics and weight-
# gradient kernels go back to calling them out of line, their sm_90a machine code 3d1f3a9's again (the weight
# gradient's byte for byte; the gelu and statistics kernels but for bbea159's hop_fragment_row). Asks whether the
# +10-30 us that small's step took with 23e7580 (bench/results/mm_tile_vec_loops-2026-12-06-h100.txt) came from
# those kernels' changed code. `git apply` the patch, then from the root in one lent-card call, carry [".whl"]
# (~6 minutes warm): card_env.sh's matmul_checks (every matmul tensor-core test on this tree's cubin, memcheck and
# racecheck at three element-wise shapes, small's step A/B against the tree without the patch, 4 rounds); then
# tiny's step A/B, 4 rounds.
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/inline_pingpong_only.patch inline || exit 1
matmul_checks inline "" "77-40-33 or 129-13-70 or 2048-100-36" 4 || exit 1
AB_ROUNDS=4 timeout 200 python3 bench/experiments/schedule_ab.py "$OUT/ab-tiny" tiny 60 base=tree=/tmp/base inline= \
    2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-tiny.log"
rm -rf "$OUT/ab-tiny"
