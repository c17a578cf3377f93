#!/usr/bin/env bash
# Resident attention_backward blocks (sm_90a, head size 64): ATTENTION_BACKWARD_RESIDENT = 263 blocks (two an SM: the
# kernel's register cap is 255, at which ptxas does not serialize the wgmma with both block kinds reachable from one
# loop) taking the (x, head, batch) items in turn, key items first (attention_backward.cuh: at_bwd_items), against
# the one-item-a-block grid at three blocks an SM. One lent-card call from the root of a tree with
# bench/experiments/attention_resident_backward.patch applied, carry [".whl"] (~5 minutes warm; LIMIT default 300):
# the attention tensor-core tests on the new cubin, each tree's attention alone, small's step A/B (the losses equal
# to the bit), then memcheck and racecheck.
set -u
source "$(dirname "$0")/card_env.sh"
attention_checks bench/experiments/attention_resident_backward.patch ${ROUNDS:-2} $((${LIMIT:-300} - 60 - SECONDS)) 25
