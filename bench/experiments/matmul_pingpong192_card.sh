#!/usr/bin/env bash
# The ping-pong's 128 x 192 tiles where they leave no more columns empty than 128 x 128 ones (small's Nn = 384 and
# 1152; bench/experiments/matmul_pingpong192.patch, forty-sixth session), checked and timed in one lent-card call
# from the root of the patched tree, carry [".whl"], logs under $OUT (~7 minutes warm): both cubins; the launches
# alone that take the ping-pong (and 128 x 256 ones, plain and gelu, whose machine code the inlined element-wise loads
# change); the matmul tensor-core tests at the ping-pong's shapes of both widths, memcheck and racecheck at two
# ragged ones; small's step A/B (schedule_ab.py, 3 rounds). PP192_TESTS: test ids joined by "or" (default: every
# matmul test).
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/matmul_pingpong192.patch pp192 || exit 1
labels='^(small (qkv|attn proj|fc proj \(K 1536\)|qkv dinp \(K 1152\)|fc dinp \(K 1536\)|attn proj dinp)|'
labels+='ragged ping-pong|gpt2 qkv|gpt2 fc proj \(K 3072\)|small fc gelu|small fc proj dinp gelu|gpt2 fc gelu)$'
alone pp192 "$labels"
matmul_checks pp192 "${PP192_TESTS-}" "8999-200-328 or 1000-1104-384 or 1000-384-1104" 3
