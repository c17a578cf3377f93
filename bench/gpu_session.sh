#!/usr/bin/env bash
# One lent-card call (H200 or H100: the benchmark builds the card's target): check the tensor-core kernels, run
# them under compute-sanitizer, profile the update piece of each model and benchmark against the peer, logs and
# results under $OUT.
#   [SANITIZE=PYTEST_K] [BENCH_TIMEOUT=S] bench/gpu_session.sh STEPS PROFILE_REPS PEER_MODES [BASELINE_TREE] [PYTEST_K]
# Wheels the device lacks are installed from .whl/ first (bench/device_wheels.sh fills it). When
# BASELINE_TREE is given (a copy of an earlier tree), its update piece is profiled too, without
# the peer, for a before/after table from one machine. SANITIZE names the tests (pytest -k) run under
# compute-sanitizer memcheck and racecheck, last.
set -u
steps=${1:-30}; reps=${2:-5}; peers=${3:-graph,compile}; baseline=${4:-}; tests=${5-matmul or timings}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/results"
log="$OUT/log.txt"
exec > >(tee -a "$log") 2>&1
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
# the native host is built by zig cc: the pinned ziglang wheel unpacked, trimmed to fit a carry (docs/notes/gpu-speed.md)
tar -xJf .whl/ziglang-0.17.1-trimmed.tar.xz -C /tmp/site || exit 1
export PYTHONPATH=/tmp/site:$PWD
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv

python3 -c "from coppelius.realize.nvrtc import compile_cubin
open('/tmp/k.cubin', 'wb').write(compile_cubin('sm_90')[0])"
export COPPELIUS_TC_CUBIN=/tmp/k.cubin
if [ -n "$tests" ]; then
    echo "== tests/gpu/test_tensor_cores_gpu.py -k '$tests'"
    timeout 240 python3 -m pytest -q -s -m gpu tests/gpu/test_tensor_cores_gpu.py -k "$tests" -p no:cacheprovider
fi
unset COPPELIUS_TC_CUBIN
echo "== bench (steps $steps, profile reps $reps, peers '$peers')"
timeout ${BENCH_TIMEOUT:-300} python3 bench/train_gpu.py --steps "$steps" --profile "$reps" --peer-modes "$peers" \
    --out "$OUT/results"
if [ -n "$baseline" ]; then
    echo "== baseline tree $baseline: profile only"
    (cd "$baseline" && mkdir -p "$OUT/baseline" && timeout 200 python3 bench/train_gpu.py --steps "$steps" \
        --profile "$reps" --peer-modes "" --out "$OUT/baseline")
fi
if [ -n "${SANITIZE:-}" ]; then
    export COPPELIUS_TC_CUBIN=/tmp/k.cubin
    for tool in memcheck racecheck; do
        echo "== compute-sanitizer --tool $tool (small ragged matmuls, both tile shapes, split-K clusters)"
        timeout 150 compute-sanitizer --tool $tool --report-api-errors no --print-limit 20 \
            python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_tensor_cores_gpu.py -k "$SANITIZE" \
            > "$OUT/$tool.txt" 2>&1
        grep -v "Host Frame\|^=========  *$" "$OUT/$tool.txt" | head -40
    done
fi
tar -czf "$OUT/results.tgz" -C "$OUT" results $( [ -n "$baseline" ] && echo baseline )
rm -rf "$OUT/results" "$OUT/baseline"
date -u
