#!/usr/bin/env bash
# attention_backward as key blocks only on sm_90a at head size 64: each key block also multiplies dQ_ij = dS_ij K_j
# (dS^T through shared memory) and adds it to query tile i's fp32 running sum in a fixed turn (j = i, i - 1, .., 0;
# attention_backward.cuh: at_dq_add), so no query block recomputes S and dP: five products a tile pair against
# seven, half the blocks. One lent-card call from the root of a tree with bench/experiments/attention_dq_turns.patch
# applied, carry [".whl"] (~6 minutes warm; LIMIT default 420): the attention tensor-core tests on the new cubin
# (stop if one fails: a hang is a turn never reached), each tree's attention alone, small's step A/B (the losses
# equal between the two trees only if the bits are; they need not be), then memcheck and racecheck.
# ROUNDS=0: only the tests and each tree's attention alone (~3 minutes warm). PATCH: another form's patch (the
# second, attention_dq_turns2.patch: the sum loaded under the products into dq's registers, the turns moved a tile
# later).
# Measured and dropped (H100, 2026-12-07): both forms correct, slower than the base alone and in small's step;
# docs/notes/gpu-speed.md, the fifty-third and fifty-fourth sessions, and bench/results/attention_dq_turns*.
set -u
source "$(dirname "$0")/card_env.sh"
attention_checks "${PATCH:-bench/experiments/attention_dq_turns.patch}" "${ROUNDS:-2}" $((${LIMIT:-420} - 60 - SECONDS)) 40
