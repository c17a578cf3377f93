#!/usr/bin/env bash
# Resident attention_forward blocks (sm_90a, head size 64): ATTENTION_FORWARD_RESIDENT = 523 blocks taking the
# (query tile, head, batch) items in turn (attention.cuh: at_items), against the one-item-a-block grid. One
# lent-card call from the root of a tree with bench/experiments/attention_resident.patch applied, carry [".whl"]
# (~4 minutes warm; LIMIT: the seconds it may take, default 240). (1) the attention tensor-core tests on the new
# cubin (this tree's geometry); (2) memcheck and racecheck on them; (3) each tree's forward and backward alone in a
# process of its own (its own geometry); (4) small's step A/B (schedule_ab.py, ROUNDS rounds, default 3: the
# losses equal to the bit if the forward's bits are).
set -u
source "$(dirname "$0")/card_env.sh"
attention_checks bench/experiments/attention_resident.patch ${ROUNDS:-3} $((${LIMIT:-240} - 40 - SECONDS)) 20
