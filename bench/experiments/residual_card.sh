#!/usr/bin/env bash
# matmul_forward_residual on the card (forty-third session): one lent-card call from the repository root, carry
# [".whl"], logs under $OUT. (1) small's step A/B (schedule_ab.py, 3 rounds) of this tree against the tree before the
# fusion (bench/experiments/matmul_residual.patch reversed): the same losses to the bit (sm_90a's ping-pong path), and
# what the layernorms' one row fewer buys; (2) the tensor-core tests of the matmul shapes that take each of its paths
# (the ping-pong, sm_90a's finishers at short and long K, the element-wise output, mm_tile's 64x64 tiles, sm_86's
# code): the fused kernel gives the bits of matmul_forward then residual_forward. AB_ONLY=1: (1) alone. SANITIZE=1: instead, compute-sanitizer's
# memcheck and racecheck on two ragged shapes (the finishers with rows past M, the element-wise output).
set -u
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
tar -xJf .whl/ziglang-0.17.1-trimmed.tar.xz -C /tmp/site
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv
if [ -n "${SANITIZE:-}" ]; then
    for tool in memcheck racecheck; do
        timeout 200 compute-sanitizer --tool $tool --report-api-errors no --print-limit 20 python3 -m pytest -q -m gpu \
            -p no:cacheprovider "tests/gpu/test_tensor_cores_gpu.py::test_matmul[8999-200-328]" \
            "tests/gpu/test_tensor_cores_gpu.py::test_matmul[77-40-33]" > "$OUT/$tool.txt" 2>&1
        echo "== $tool"; grep -v "Host Frame\|^=========  *$" "$OUT/$tool.txt" | tail -8
    done
    exit 0
fi
rm -rf /tmp/base && mkdir -p /tmp/base && tar -cf - --exclude=./.whl --exclude=./.git . | tar -xf - -C /tmp/base
(cd /tmp/base && patch -s -R -p1 < bench/experiments/matmul_residual.patch) && grep -c "matmul_forward_residual" \
    /tmp/base/coppelius/plan/graph.py
echo "== schedule_ab small"
AB_ROUNDS=3 timeout 300 python3 bench/experiments/schedule_ab.py "$OUT/ab" small 30 base=tree=/tmp/base fused= \
    2>&1 | tee "$OUT/ab.log" | grep -E "^round|rror|Traceback|loss"
if [ -z "${AB_ONLY:-}" ]; then
    F=tests/gpu/test_tensor_cores_gpu.py
    timeout 300 python3 -m pytest -q -s -m gpu -p no:cacheprovider \
        "$F::test_matmul[16384-384-384]" "$F::test_matmul[8999-200-328]" "$F::test_matmul[77-40-33]" \
        "$F::test_matmul[16384-384-1152]" "$F::test_matmul[1024-64-192]" "$F::test_matmul_gpt2[32768-3072-768]" \
        "$F::test_matmul_rtx3090_code[300-136-264]" > "$OUT/tests.log" 2>&1
    grep -E "fwd_residual|passed|failed|Error|differs" "$OUT/tests.log" | tail -40
fi
