#!/usr/bin/env bash
# sm_90a's weight gradients on 256 x 192 tiles where 192-column tiles fit and 256 rows leave at most a fifth of M
# empty (small's qkv and fc: 30% fewer stage bytes a FLOP than 128 x 192; four 56 KiB stages in 225 KiB blocks;
# bench/experiments/weight_gradient256.patch, forty-sixth session, written without a card: ptxas 0 C7507, its spills
# 28 bytes outside the main loop), checked
# and timed in one lent-card call from the root of the patched tree, carry [".whl"], logs under $OUT (~7 minutes
# warm): both cubins; small's weight gradients alone, each tree with its own geometry (the tile counts differ, so
# one tree's launches cannot run the other's cubin); every matmul tensor-core test (two new ragged shapes take the
# new tile, one through TMA, one element-wise), memcheck and racecheck at those; small's step A/B (3 rounds).
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/weight_gradient256.patch wg256 || exit 1
alone wg256 '^small (qkv|fc|attn proj|fc proj) dw$' apart
matmul_checks wg256 "" "3000-376-1000 or 3000-372-1000" 3
