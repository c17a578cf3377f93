#!/usr/bin/env bash
# Where attention_dq_turns.patch's time goes (one lent-card call from the root of a tree with the patch applied,
# carry [".whl"], ~5 minutes warm): attention alone at small's and gpt2's shapes for the base, the patch, and two
# variants of it whose dQ is wrong, only timed: `nowait` (no part waits for its turn or reads the sum: each writes
# its part, fenced, and moves the turn), `noadd` (no part leaves the block but the last's fp16 rows); then the
# patch's kernel under ncu at small's shape.
# Measured (H100, 2026-12-07): bench/results/attention_dq_turns-2026-12-07-h100.txt; the form was dropped.
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/attention_dq_turns.patch new || exit 1
for v in nowait noadd; do variant $v; done
sed -i 's/^    if (turn > 0) {$/    if (false) {/' /tmp/nowait/coppelius/kernels/cuda/attention_backward.cuh
sed -i 's/^    if (turn > 0) {$/    if (!last) return;\n    if (false) {/' /tmp/noadd/coppelius/kernels/cuda/attention_backward.cuh
grep -c "if (false)" /tmp/nowait/coppelius/kernels/cuda/attention_backward.cuh /tmp/noadd/coppelius/kernels/cuda/attention_backward.cuh
cubin /tmp/nowait /tmp/nowait.cubin & cubin /tmp/noadd /tmp/noadd.cubin & wait
attention_alone base new nowait noadd
AB_SHAPES=small AB_ROUNDS=1 ncu_kernel attention_backward python3 bench/experiments/attention_backward_ab.py /tmp/new.cubin
