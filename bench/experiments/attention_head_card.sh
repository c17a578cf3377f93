#!/usr/bin/env bash
# attention_backward_head: small's attention backward as one block a (batch, head) on sm_90a (hs 33-64, T <= 256;
# bench/experiments/attention_head.patch, forty-seventh session, written without a card: `git apply` it first, then
# run this from the root in one lent-card call, carry [".whl"], ~8 minutes warm). The head's K, V, Q and dO stay in
# shared memory (210 KiB, one block an SM), the key tiles walk the query tiles once (five products a tile pair
# against the two block kinds' seven, no S or dP recomputed), their dS^T tiles are kept and dQ sums them against K
# in one wgmma chain a query tile. Here: every attention tensor-core test with this tree's cubin (the head kernel at
# (4, 256, 384, 6), (2, 130, 120, 2) element-wise, (2, 33, 48, 1), (2, 150, 128, 2), the sharp and the full-batch
# small cases; the old kernel at (1, 300, 128, 2) and gpt2's), their max differences printed; memcheck, racecheck
# and synccheck at three head shapes; small's backward alone, attention_backward against attention_backward_head
# from the one cubin (bits and error against float64); the head-size-64 tests again with
# attention_head_early_loads.patch on top (qkv, out and lse loaded before the grid dependency, dO after); small's step
# A/B (3 rounds): the tree without the patch, this tree, and it with the early loads.
set -u
source "$(dirname "$0")/card_env.sh"
cubin . /tmp/head.cubin
tests=(python3 -m pytest -m gpu tests/gpu/test_tensor_cores_gpu.py -q -s -p no:cacheprovider)
COPPELIUS_TC_CUBIN=/tmp/head.cubin timeout 240 "${tests[@]}" -k "attention" > "$OUT/tests.txt" 2>&1
echo "== attention tests"
grep -E "attn_bwd d[qkv] .*attention_backward_head|^E .*(Error|assert)|passed|failed" "$OUT/tests.txt" | tail -24
for tool in memcheck racecheck synccheck; do
    COPPELIUS_TC_CUBIN=/tmp/head.cubin timeout 120 compute-sanitizer --tool $tool --report-api-errors no \
        "${tests[@]}" -k "test_attention and (4-256-384-6 or 2-130-120-2 or 2-33-48-1)" > "$OUT/$tool.txt" 2>&1
    echo "== $tool"; tail -1 "$OUT/$tool.txt"
done
AB_SHAPES=small AB_ROUNDS=5 timeout 120 python3 bench/experiments/attention_backward_ab.py \
    /tmp/head.cubin:attention_backward /tmp/head.cubin:attention_backward_head 2>&1 | tee "$OUT/alone.txt"
variant early && (cd /tmp/early && patch -s -p1 < bench/experiments/attention_head_early_loads.patch) || exit 1
cubin /tmp/early /tmp/early.cubin
COPPELIUS_TC_CUBIN=/tmp/early.cubin timeout 120 "${tests[@]}" \
    -k "test_attention and (4-256-384-6 or 2-130-120-2 or 2-33-48-1 or 2-150-128-2 or sharp)" > "$OUT/early.txt" 2>&1
echo "== early loads: head-size-64 tests"; grep -E "^E .*(Error|assert)|passed|failed" "$OUT/early.txt" | tail -4
unpatched bench/experiments/attention_head.patch || exit 1
AB_ROUNDS=3 timeout 240 python3 bench/experiments/schedule_ab.py "$OUT/ab-small" small 30 base=tree=/tmp/base head= \
    early=tree=/tmp/early 2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-small.log"
rm -rf "$OUT/ab-small"
