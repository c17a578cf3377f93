#!/usr/bin/env bash
# The 128x192 one-a-block tiles for sm_90a's plain forwards and input gradients at Nn = 384, K >= 1024
# (bench/experiments/matmul_narrow.patch, forty-fifth session), checked and timed in one lent-card call from the root
# of the patched tree, carry [".whl"], logs under $OUT (~8 minutes warm): both cubins compiled here, each timed alone
# from its own tree (matmul_forward_ab.py: its geometry is its tree's), the matmul tensor-core tests and memcheck and
# racecheck on the patched cubin, then small's step A/B (schedule_ab.py, 3 rounds).
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/matmul_narrow.patch narrow || exit 1
alone narrow '^small' apart
matmul_checks narrow "16384-1536-384 or 16384-384-1152 or 1000-1100-376 or 1000-376-1104 or 2072-2136-70 or \
2048-72-2136" "1000-1100-376 or 1000-376-1104" 3
