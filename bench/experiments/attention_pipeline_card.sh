#!/usr/bin/env bash
# The wgmma attention forward in FA3's order within the warpgroup (tile j + 1's scores issued before tile j's
# O += P V; j + 1's softmax under it): one lent-card call from the root of a tree with
# bench/experiments/attention_pipeline.patch applied (new: K and V of a tile in commit groups of their own, each K
# loaded STAGES - 1 tiles ahead), carry [".whl"] (~7 minutes warm). one: new without
# attention_pipeline_kv_groups.patch (a group a tile, so K_{j + STAGES} waits for O += P_j V_j); base: the tree
# without either. (1) the attention tensor-core tests on new's cubin; (2) memcheck, racecheck and synccheck on the
# forward's tests; (3) each forward and backward alone, out and lse compared bit for bit with base's
# (attention_backward_ab.py); (4) small's and tiny's step A/B (schedule_ab.py, ROUNDS rounds, default 3, and 2),
# small's before the sanitizers; LIMIT: the seconds the call may take, default 570.
set -u
source "$(dirname "$0")/card_env.sh"
unpatched bench/experiments/attention_pipeline.patch || exit 1
variant one && (cd /tmp/one && patch -s -R -p1 < bench/experiments/attention_pipeline_kv_groups.patch) || exit 1
cubin /tmp/base /tmp/base.cubin & cubin /tmp/one /tmp/one.cubin & cubin . /tmp/new.cubin & wait
tc_tests /tmp/new.cubin attention || exit 1
AB_ROUNDS=2 timeout 150 python3 bench/experiments/attention_backward_ab.py /tmp/base.cubin /tmp/one.cubin \
    /tmp/new.cubin 2>&1 | tee "$OUT/alone.txt" | grep -E "forward|rror" | head -12
step_ab small ${ROUNDS:-3} $((${LIMIT:-570} - SECONDS)) base=tree=/tmp/base one=tree=/tmp/one new=
tc_sanitized /tmp/new.cubin "test_attention and not models and not rtx3090" 60 memcheck racecheck synccheck
step_ab tiny 2 $((${LIMIT:-570} - SECONDS)) base=tree=/tmp/base one=tree=/tmp/one new=
