#!/usr/bin/env bash
# Resident attention_forward blocks, with and without the next item's first tiles loaded under the current item's
# epilogue (attention_resident_prefetch.patch on top of attention_resident.patch). One lent-card call from the root
# of a tree with bench/experiments/attention_resident.patch applied, carry [".whl"] (~6 minutes warm; LIMIT: the
# seconds it may take, default 420): (1) the attention tensor-core tests on both new cubins; (2) each tree's forward
# and backward alone in a process of its own; (3) small's step A/B of base, new (resident) and pre (resident and
# prefetch), ROUNDS rounds (default 2: the losses equal to the bit if the forward's bits are); (4) memcheck and
# racecheck on the prefetch cubin.
set -u
source "$(dirname "$0")/card_env.sh"
variant pre && (cd /tmp/pre && patch -s -p1 < bench/experiments/attention_resident_prefetch.patch) || exit 1
cubin /tmp/pre /tmp/pre.cubin &
unpatched_cubins bench/experiments/attention_resident.patch new || exit 1
wait
tc_tests /tmp/new.cubin attention 120 || exit 1
cp "$OUT/tests.txt" "$OUT/tests-new.txt"
tc_tests /tmp/pre.cubin attention 120 || exit 1
attention_alone base new pre
step_ab small ${ROUNDS:-2} $((${LIMIT:-420} - 60 - SECONDS)) base=tree=/tmp/base new= pre=tree=/tmp/pre
tc_sanitized /tmp/pre.cubin "test_attention and not models and not rtx3090 and not sharp" 20 memcheck racecheck
