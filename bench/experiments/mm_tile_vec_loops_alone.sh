#!/usr/bin/env bash
# small's matmul launches alone (card_env.sh's alone), this tree's cubin against the same tree without
# mm_tile_vec_loops.patch, in one lent-card call from the root, carry [".whl"] (~1 minute warm). It found the patch's
# first version (the k-loop built twice inside one mm_tile) ~20% slower on every launch: ptxas had serialized every
# wgmma of the kernels (C7515), bench/results/mm_tile_vec_loops-2026-12-06-h100.txt.
set -u
source bench/experiments/card_env.sh
variant pp192 && (cd /tmp/pp192 && patch -s -R -p1 < bench/experiments/mm_tile_vec_loops.patch) || exit 1
cubin /tmp/pp192 /tmp/base.cubin & cubin . /tmp/loops.cubin & wait
alone loops '^small' 
grep -E "^1 " $OUT/alone.txt
