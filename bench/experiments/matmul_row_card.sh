#!/usr/bin/env bash
# The 128 x 384 row tile for sm_90a's plain matmuls at Nn = 384, K >= 1024 (bench/experiments/matmul_row.patch,
# forty-fifth session), checked and timed in one short lent-card call from the root of the patched tree, carry
# [".whl"], logs under $OUT (~4.5 minutes warm): both cubins; the matmul tensor-core tests at the row shapes and the
# element-wise ones (mm_load_elementwise is inlined on sm_90a for setmaxnreg), memcheck and racecheck at a ragged
# row shape; small's step A/B (schedule_ab.py, 2 rounds); both cubins' launches alone.
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/matmul_row.patch row || exit 1
matmul_checks row "16384-1536-384 or 16384-384-1152 or 1000-1104-384 or 1000-384-1104 or 1000-72-200 or \
300-136-264 or 77-40-33" "1000-384-1104" 2 || exit 1
alone row '^small (fc proj|qkv dinp)'
