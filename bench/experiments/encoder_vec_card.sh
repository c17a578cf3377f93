#!/usr/bin/env bash
# encoder_backward with the access width a template argument (bench/experiments/encoder_vec.patch; forty-fourth
# session) and small's qkv forward on the ping-pong: one lent-card call from the repository root, carry [".whl"],
# logs under $OUT (~8 minutes warm). (1) the encoder kernel tests (every output equal to the cpu device's bit for
# bit: vec and element-wise paths, byte and GPT-2 vocabularies) and compute-sanitizer memcheck on them; (2) small's
# step A/B (schedule_ab.py, 3 rounds) of this tree against: vec32 (32 rows in flight), old32 (the encoder before the
# patch at 32 rows in flight), head (the encoder before the patch and qkv off the ping-pong: the tree before both);
# (3) small at 1, 2 and 4 steps a launch (train_gpu.py) while time is left.
set -u
source "$(dirname "$0")/card_env.sh"
tests=(python3 -m pytest -q -s -m gpu tests/gpu/test_kernels_gpu.py -p no:cacheprovider)
timeout 150 "${tests[@]}" -k "encoder" > "$OUT/tests.log" 2>&1
grep -E "encoder_sort \+|passed|failed|Error" "$OUT/tests.log" | tail -6
timeout 100 compute-sanitizer --tool memcheck --report-api-errors no "${tests[@]}" \
    -k "encoder_backward and not model_sized" > "$OUT/memcheck.log" 2>&1
echo "== memcheck"; tail -2 "$OUT/memcheck.log"
inflight() { sed -i "s/constexpr int SPREAD_INFLIGHT = 64;/constexpr int SPREAD_INFLIGHT = $2;/" "/tmp/$1/coppelius/kernels/cuda/encoder.cuh"; }
variant vec32 && inflight vec32 32
variant old32 && (cd /tmp/old32 && patch -s -R -p1 < bench/experiments/encoder_vec.patch) && inflight old32 32
variant head && (cd /tmp/head && patch -s -R -p1 < bench/experiments/encoder_vec.patch) && \
    sed -i 's/return 10 \* ((Nn + 255)/return 5 * ((Nn + 255)/' /tmp/head/coppelius/kernels/cuda/matmul_hopper.cuh
grep -c "SPREAD_INFLIGHT = 32" /tmp/vec32/coppelius/kernels/cuda/encoder.cuh /tmp/old32/coppelius/kernels/cuda/encoder.cuh
grep -c "bool vec)" /tmp/old32/coppelius/kernels/cuda/encoder.cuh /tmp/head/coppelius/kernels/cuda/encoder.cuh
grep -c "return 5 \* ((Nn" /tmp/head/coppelius/kernels/cuda/matmul_hopper.cuh
echo "== schedule_ab small"
AB_ROUNDS=3 timeout 280 python3 bench/experiments/schedule_ab.py "$OUT/ab" small 30 base= vec32=tree=/tmp/vec32 \
    old32=tree=/tmp/old32 head=tree=/tmp/head 2>&1 | tee "$OUT/ab.log" | grep -E "^round|rror|Traceback"
rm -rf "$OUT/ab"/*/  # the runs' trees: not wanted back
left=$((570 - SECONDS))
echo "== small at 1, 2, 4 steps a launch ($left s left)"
[ $left -gt 150 ] && timeout $((left - 10)) python3 bench/train_gpu.py --models small --steps 24 \
    --steps-per-launch 1,2,4 --peer-modes graph --out "$OUT" > "$OUT/bench.log" 2>&1
grep -E "steps_per_launch|batch|Error|Traceback" "$OUT/bench.log"
