#!/usr/bin/env bash
# The element-wise loads inlined only in the kernels that hold the ping-pong (matmul_forward, matmul_backward_input;
# bench/experiments/inline_pingpong_only.patch, forty-seventh session, no card yet): the gelu, statistics and weight-
# gradient kernels go back to calling them out of line, their sm_90a machine code 3d1f3a9's again (the weight
# gradient's byte for byte; the gelu and statistics kernels but for bbea159's hop_fragment_row). Asks whether the
# +10-30 us that small's step took with 23e7580 (bench/results/mm_tile_vec_loops-2026-12-06-h100.txt) came from
# those kernels' changed code. `git apply` the patch, then from the root in one lent-card call, carry [".whl"]
# (~5 minutes warm): every matmul tensor-core test on this tree's cubin, memcheck at three element-wise shapes; the
# step A/B against the tree without the patch: tiny (4 rounds), small (4 rounds).
set -u
source "$(dirname "$0")/card_env.sh"
cubin . /tmp/inline.cubin
tests=(python3 -m pytest -m gpu tests/gpu/test_tensor_cores_gpu.py -q -p no:cacheprovider -k test_matmul)
COPPELIUS_TC_CUBIN=/tmp/inline.cubin timeout 150 "${tests[@]}" > "$OUT/tests.txt" 2>&1
echo "== tensor-core tests"; grep -E "^E .*Error|passed|failed" "$OUT/tests.txt" | tail -4
COPPELIUS_TC_CUBIN=/tmp/inline.cubin timeout 100 compute-sanitizer --tool memcheck --report-api-errors no \
    "${tests[@]}" -k "77-40-33 or 129-13-70 or 2048-100-36" > "$OUT/memcheck.txt" 2>&1
echo "== memcheck"; tail -1 "$OUT/memcheck.txt"
unpatched bench/experiments/inline_pingpong_only.patch || exit 1
for model in tiny small; do
    steps=$([ $model = tiny ] && echo 60 || echo 30)
    AB_ROUNDS=4 timeout 200 python3 bench/experiments/schedule_ab.py "$OUT/ab-$model" $model $steps base=tree=/tmp/base \
        inline= 2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-$model.log"
    rm -rf "$OUT/ab-$model"
done
