#!/usr/bin/env bash
# matmul_forward_residual (forty-third session, 1991a29, reverted: small 3.65 -> 3.71 ms on the H100,
# bench/results/matmul_residual_ab-2026-12-06-h100.txt). The change is bench/experiments/matmul_residual.patch (catalog
# 26, the plan, the CUDA/C/numpy kernels and their tests); this call rebuilds it in a copy of this tree. One lent-card
# call from the repository root, carry [".whl"], logs under $OUT: (1) small's step A/B (schedule_ab.py, 3 rounds) of this
# tree against the patched copy: the same losses to the bit, and the time; MODEL=gpt2-124m for the other model (12
# steps); (2) with TESTS=1 the patched copy's tensor-core tests of the paths the kernel takes; SANITIZE=1 instead,
# compute-sanitizer's memcheck and racecheck on two ragged shapes (the finishers with rows past M, the element-wise
# output).
set -u
source "$(dirname "$0")/card_env.sh"
variant fused
(cd /tmp/fused && patch -s -p1 < bench/experiments/matmul_residual.patch) && grep -c "matmul_forward_residual" \
    /tmp/fused/coppelius/plan/graph.py
F=tests/gpu/test_tensor_cores_gpu.py
if [ -n "${SANITIZE:-}" ]; then
    for tool in memcheck racecheck; do
        (cd /tmp/fused && timeout 200 compute-sanitizer --tool $tool --report-api-errors no --print-limit 20 \
            env PYTHONPATH=/tmp/site:/tmp/fused python3 -m pytest -q -m gpu -p no:cacheprovider \
            "$F::test_matmul[8999-200-328]" "$F::test_matmul[77-40-33]") > "$OUT/$tool.txt" 2>&1
        echo "== $tool"; grep -v "Host Frame\|^=========  *$" "$OUT/$tool.txt" | tail -8
    done
    exit 0
fi
MODEL=${MODEL:-small}
echo "== schedule_ab $MODEL"
AB_ROUNDS=3 timeout 300 python3 bench/experiments/schedule_ab.py "$OUT/ab" "$MODEL" "$([ "$MODEL" = small ] && echo 30 \
    || echo 12)" base= fused=tree=/tmp/fused 2>&1 | tee "$OUT/ab.log" | grep -E "^round|rror|Traceback"
if [ -n "${TESTS:-}" ]; then
    (cd /tmp/fused && PYTHONPATH=/tmp/site:/tmp/fused timeout 300 python3 -m pytest -q -s -m gpu -p no:cacheprovider \
        "$F::test_matmul[16384-384-384]" "$F::test_matmul[8999-200-328]" "$F::test_matmul[77-40-33]" \
        "$F::test_matmul[16384-384-1152]" "$F::test_matmul[1024-64-192]" "$F::test_matmul_gpt2[32768-3072-768]" \
        "$F::test_matmul_rtx3090_code[300-136-264]") > "$OUT/tests.log" 2>&1
    grep -E "fwd_residual|passed|failed|Error|differs" "$OUT/tests.log" | tail -40
fi
