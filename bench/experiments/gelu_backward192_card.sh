#!/usr/bin/env bash
# sm_90a's gelu input gradient on 128 x 192 tiles where two of them cover the columns as two of 256 do
# (bench/experiments/gelu_backward192.patch, forty-sixth session; written for Nn = 384, which no model's gelu input
# gradient has: its Nn is 4C, small's 1536, so the launches timed below never take it), checked and timed in one
# lent-card call from the
# root of the patched tree, carry [".whl"], logs under $OUT (~6 minutes warm): both cubins; the gelu input gradients
# alone; every matmul tensor-core test (the gelu's bits against the unfused launches at each shape), memcheck and
# racecheck at ragged shapes; small's step A/B (schedule_ab.py, 3 rounds).
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/gelu_backward192.patch gelu192 || exit 1
alone gelu192 'dinp gelu$'
matmul_checks gelu192 "" "300-136-264 or 1000-72-200 or 1000-1104-384" 3
