#!/usr/bin/env bash
# A chain of kernel branches checked in one device call (pack_branches.py makes the cubins): matmul_forward_ab.py
# between each pair of consecutive cubins (each change's times alone, and whether it keeps the bits), then the matmul
# tensor-core tests and compute-sanitizer's TOOLS at SHAPES (test ids joined by "or") on the last cubin. From the
# root of the last branch's tree on the card (its geometry launches every cubin), $OUT set, the carried wheels
# installed (docs/notes/gpu-speed.md); each part's log under $OUT and its tail here. At most 2 minutes a pair and
# ~5 the rest (a device call ends at 600 s).
#     [TOOLS="memcheck racecheck"] bash bench/experiments/branch_checks.sh "SHAPES" main.cubin a.cubin [b.cubin ...]
set -uo pipefail
shapes=$1
shift
tests=(python3 -m pytest -m gpu tests/gpu/test_tensor_cores_gpu.py -q -p no:cacheprovider)
previous=$1
shift
for cubin in "$@"; do
    log="$OUT/forward_ab-$(basename "$previous" .cubin)-$(basename "$cubin" .cubin).txt"
    timeout 120 python3 bench/experiments/matmul_forward_ab.py "$previous" "$cubin" > "$log" 2>&1
    echo "== $previous -> $cubin"
    tail -42 "$log"
    previous=$cubin
done
COPPELIUS_TC_CUBIN=$previous timeout 200 "${tests[@]}" -k matmul > "$OUT/tensor_cores.txt" 2>&1  # a hang: the timeout
echo "== matmul tensor-core tests on $previous"
tail -3 "$OUT/tensor_cores.txt"
for tool in ${TOOLS:-memcheck}; do
    COPPELIUS_TC_CUBIN=$previous timeout 90 compute-sanitizer --tool "$tool" --report-api-errors no "${tests[@]}" \
        -k "test_matmul and ($shapes)" > "$OUT/$tool.txt" 2>&1
    echo "== $tool at $shapes"
    tail -3 "$OUT/$tool.txt"
done
