#!/usr/bin/env bash
# matmul_forward_residual_layernorm (bench/experiments/residual_layernorm.patch, forty-eighth session): small's two
# projections and the residual_layernorm_forward after each as one launch on sm_90a (128 whole rows a block, y never
# stored). `git apply` the patch, then from the root in one lent-card call, carry [".whl"] (~6 minutes warm): its
# tensor-core tests (max differences, and the elements that differ from the two launches'), memcheck, racecheck and
# synccheck at the ragged shapes, the launch alone against the pair it fuses, small's step A/B against the tree
# without the patch (3 rounds), then residual_layernorm_profile.sh (ncu at small's fc proj). Its first version ran
# here (bench/results/residual_layernorm-2026-12-06-h100.txt); the patch now holds the third (3 stages, the residual
# rows in the ring, TMA boxes in and out), not yet on a card.
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/residual_layernorm.patch fused || exit 1
tests=(python3 -m pytest -m gpu tests/gpu/test_tensor_cores_gpu.py -q -s -p no:cacheprovider)
COPPELIUS_TC_CUBIN=/tmp/fused.cubin timeout 150 "${tests[@]}" -k "residual_layernorm" > "$OUT/tests.txt" 2>&1
echo "== tests"; grep -E "fused N=|^E .*(Error|assert)|passed|failed" "$OUT/tests.txt" | tail -40
grep -q " passed" "$OUT/tests.txt" && ! grep -q "failed" "$OUT/tests.txt" || exit 1
for tool in memcheck racecheck synccheck; do
    COPPELIUS_TC_CUBIN=/tmp/fused.cubin timeout 100 compute-sanitizer --tool $tool --report-api-errors no \
        "${tests[@]}" -k "residual_layernorm and (1000-72-320 or 300-1104-264)" > "$OUT/$tool.txt" 2>&1
    echo "== $tool"; tail -1 "$OUT/$tool.txt"
done
timeout 100 python3 bench/experiments/residual_layernorm_ab.py /tmp/fused.cubin 2>&1 | tee "$OUT/alone.txt"
AB_ROUNDS=3 timeout 200 python3 bench/experiments/schedule_ab.py "$OUT/ab-small" small 30 base=tree=/tmp/base fused= \
    2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-small.log"
rm -rf "$OUT/ab-small"
bash "$(dirname "$0")/residual_layernorm_profile.sh" /tmp/fused.cubin 2>&1 | tail -45
