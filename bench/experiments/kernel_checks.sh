#!/usr/bin/env bash
# The card's checks of a matmul kernel change in one device call, each part's log under $OUT and its tail here:
# matmul_forward_ab.py between the two cubins (times, same bits), the matmul tensor-core tests on the new cubin,
# memcheck and racecheck at SHAPES (test ids joined by "or", e.g. "16384-1536-384 or 8999-200-328"), then the
# training step A/B (step_ab.sh DIFF small 2). From the root of the changed tree on the card, $OUT set, the carried
# wheels installed (docs/notes/gpu-speed.md); ~8 minutes.
#     bash bench/experiments/kernel_checks.sh old.cubin new.cubin change.diff "SHAPES"
set -uo pipefail
old=$1 new=$2 diff=$3 shapes=$4
tests=(python3 -m pytest -m gpu tests/gpu/test_tensor_cores_gpu.py -q -p no:cacheprovider)
timeout 120 python3 bench/experiments/matmul_forward_ab.py "$old" "$new" > "$OUT/forward_ab.txt" 2>&1
tail -42 "$OUT/forward_ab.txt"
COPPELIUS_TC_CUBIN=$new timeout 200 "${tests[@]}" -k matmul > "$OUT/tensor_cores.txt" 2>&1  # a hang: the timeout
tail -3 "$OUT/tensor_cores.txt"
for tool in memcheck racecheck; do
    COPPELIUS_TC_CUBIN=$new timeout 90 compute-sanitizer --tool "$tool" --report-api-errors no "${tests[@]}" \
        -k "test_matmul and ($shapes)" > "$OUT/$tool.txt" 2>&1
    tail -3 "$OUT/$tool.txt"
done
timeout 300 bash bench/experiments/step_ab.sh "$diff" small 2 > "$OUT/step_ab.txt" 2>&1
cat "$OUT/step_ab.txt"
