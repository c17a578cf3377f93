#!/usr/bin/env bash
# One lent-card call: an attention patch's macro variants against the patch's defaults (= main's kernels where the
# defaults keep main's code), side by side (attention_backward_ab.py: times, bits against the first, errors against
# float64), then the attention tests and compute-sanitizer memcheck/racecheck on each variant. Applies PATCH to
# this copy of the tree (the geometry the harness reads is the patched one). Logs under $OUT.
#   [AB_ROUNDS=N] bash bench/experiments/attention_patch_ab.sh PATCH "NAME VALUE" ["NAME VALUE" ...]
set -u
patch=$1; shift
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AB_ROUNDS=${AB_ROUNDS:-5}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.sm --format=csv
git apply "$patch" || patch -p1 < "$patch" || exit 1
mkdir -p /tmp/ab "$OUT"
python3 bench/experiments/build_variants.py /tmp/ab -D COPTC_PATCH_DEFAULTS 0 > "$OUT/build-defaults.log" 2>&1 &
for variant in "$@"; do
    python3 bench/experiments/build_variants.py /tmp/ab -D $variant > "$OUT/build-${variant// /-}.log" 2>&1 &
done
wait
ls /tmp/ab
cubins=(/tmp/ab/COPTC_PATCH_DEFAULTS-0.cubin)
for variant in "$@"; do cubins+=(/tmp/ab/${variant// /-}.cubin); done
timeout 300 python3 bench/experiments/attention_backward_ab.py "${cubins[@]}" 2>&1 | tee "$OUT/ab.txt"
for cubin in "${cubins[@]:1}"; do
    echo "== $cubin"
    COPPELIUS_TC_CUBIN=$cubin timeout 100 python3 -m pytest -q -m gpu tests/gpu/test_tensor_cores_gpu.py -k attention \
        -p no:cacheprovider 2>&1 | tail -1
    for tool in memcheck racecheck; do
        COPPELIUS_TC_CUBIN=$cubin timeout 120 compute-sanitizer --tool $tool --report-api-errors no --print-limit 20 \
            python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_tensor_cores_gpu.py \
            -k "test_attention and not models and not rtx3090 and not sharp" 2>&1 | grep "SUMMARY"
    done
done
