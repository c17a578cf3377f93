#!/usr/bin/env bash
# mm_tile built once for each value of vec on sm_90a (bench/experiments/mm_tile_vec_loops.patch, applied in this
# tree), against the loss it answers: tiny's step 0.155 -> 0.168 ms with bbea159's inlined element-wise loads
# (tiny_pp192_card.sh, H100, 2026-12-06). One lent-card call from the root, carry [".whl"] (~6 minutes warm): tiny's
# step A/B (4 rounds) between base (no 128 x 192 ping-pong, no vec loops: 3d1f3a9's kernels), pp192 (this tree
# without the vec loops: cee078b) and this tree; every matmul tensor-core test on this tree's cubin, memcheck at
# three element-wise shapes and a 128 x 192 one; small's step A/B (3 rounds) between pp192 and this tree. (A first
# version built only the k-loop twice: ptxas serialized every wgmma of the kernels, C7515, and small's launches took
# ~20% longer, bench/results/mm_tile_vec_loops-2026-12-06-h100.txt.)
set -u
source "$(dirname "$0")/card_env.sh"
patches=bench/experiments
variant pp192 && (cd /tmp/pp192 && patch -s -R -p1 < $patches/mm_tile_vec_loops.patch) || exit 1
variant base && (cd /tmp/base && patch -s -R -p1 < $patches/mm_tile_vec_loops.patch &&
    patch -s -R -p1 < $patches/matmul_pingpong192.patch) || exit 1
AB_ROUNDS=4 timeout 200 python3 $patches/schedule_ab.py "$OUT/ab-tiny" tiny 60 base=tree=/tmp/base \
    pp192=tree=/tmp/pp192 loops= 2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-tiny.log"
cubin . /tmp/loops.cubin
tests=(python3 -m pytest -m gpu tests/gpu/test_tensor_cores_gpu.py -q -p no:cacheprovider -k test_matmul)
COPPELIUS_TC_CUBIN=/tmp/loops.cubin timeout 120 "${tests[@]}" > "$OUT/tests-loops.txt" 2>&1
echo "== loops tensor-core tests"; grep -E "^E .*Error|passed|failed" "$OUT/tests-loops.txt" | tail -4
COPPELIUS_TC_CUBIN=/tmp/loops.cubin timeout 100 compute-sanitizer --tool memcheck --report-api-errors no \
    "${tests[@]}" -k "77-40-33 or 129-13-70 or 1000-72-200 or 1000-1104-384" > "$OUT/memcheck.txt" 2>&1
echo "== memcheck"; tail -1 "$OUT/memcheck.txt"
AB_ROUNDS=3 timeout 150 python3 $patches/schedule_ab.py "$OUT/ab-small" small 30 pp192=tree=/tmp/pp192 loops= \
    2>&1 | grep -E "^round|rror|Traceback" | tee "$OUT/ab-small.log"
rm -rf "$OUT/ab-tiny" "$OUT/ab-small"
