#!/usr/bin/env bash
# Several steps a launch on the card (forty-second session): one lent-card call from the repository root, carry
# [".whl"], logs under $OUT. (1) the GPU tests of the native host that hold it (the same bytes at 1, 2 and 3 steps a
# launch; the native host repeats the Python host); (2) bench/train_gpu.py on tiny and small at 1 and 2 steps a
# launch against the peer's whole-step graph. TESTS_ONLY=1: (1) alone (~3 minutes warm); BENCH_ONLY=1: (2) alone,
# KS the steps a launch to bench (default 1,2; STEPS, default 24, must be a multiple of each).
set -u
source "$(dirname "$0")/card_env.sh"
[ -z "${BENCH_ONLY:-}" ] && timeout 240 python3 -m pytest -q -s -m gpu tests/gpu/test_native_gpu.py -p no:cacheprovider \
    -k "several_steps or repeats_the_python" > "$OUT/tests.log" 2>&1
[ -z "${BENCH_ONLY:-}" ] && grep -E "same losses|native vs python|passed|failed|Error" "$OUT/tests.log" | tail -8
[ -n "${TESTS_ONLY:-}" ] && exit 0  # a short call: the tests alone
timeout 500 python3 bench/train_gpu.py --models tiny,small --steps "${STEPS:-24}" --steps-per-launch "${KS:-1,2}" \
    --peer-modes graph \
    --out "$OUT" > "$OUT/bench.log" 2>&1
grep -E "steps_per_launch|batch|Error|Traceback" "$OUT/bench.log"
