#!/usr/bin/env bash
# Written in the forty-first session (no card was lent), not yet run. One lent-card call (~8 minutes warm), from the
# repository root, carry [".whl"]; logs under $OUT:
#   1. small's step A/B (bench/experiments/schedule_ab.py, 3 rounds, same machine) of this tree against:
#      qkvpp    small's qkv forward (Nn 1152, a tenth of a 128x256 tile's columns empty) on the ping-pong: only the rule
#               hop_pingpong_pays (matmul_hopper.cuh) from a fifth empty to a tenth; the same bits (35.2 -> 34.0 us a
#               launch on the H200 in the thirty-second session, before the tile schedule);
#      nfsplit  bench/experiments/nonfinite_split.patch: the non-finite check of every gradient but the embeddings'
#               beside encoder_backward, the embeddings' (wte, wpe) after it (admission's learner-coverage holds the
#               two to every gradient once); the same bits; ~7 us expected at small (nonfinite_check 9.2 us alone);
#      inf32    encoder_backward with 32 rows in flight a warp (SPREAD_INFLIGHT), 2 blocks an SM as now (at 3 the
#               gpt2 path spills: 80 registers, 160 bytes of stack);
#      inf128   128 rows in flight at 1 block an SM; both the same sums in the same order (the same bits);
#   2. encoder_backward under Nsight Compute at small's sizes (tests/gpu/test_kernels_gpu.py's model_sized case,
#      Zipf tokens): 44-46 us in the step against ~4 us of bytes; the profile says what a block waits on.
set -u
source "$(dirname "$0")/card_env.sh"
variant qkvpp && sed -i 's/return 5 \* ((Nn + 255)/return 10 * ((Nn + 255)/' /tmp/qkvpp/coppelius/kernels/cuda/matmul_hopper.cuh
variant nfsplit && (cd /tmp/nfsplit && patch -s -p1 < bench/experiments/nonfinite_split.patch)
for v in inf32:32:2 inf128:128:1; do
    IFS=: read -r name rows blocks <<< "$v"
    variant "$name" && sed -i -e "s/constexpr int SPREAD_INFLIGHT = 64;/constexpr int SPREAD_INFLIGHT = $rows;/" \
        -e "s/__launch_bounds__(256, 2)\$/__launch_bounds__(256, $blocks)/" \
        "/tmp/$name/coppelius/kernels/cuda/encoder.cuh"
done
grep -c "return 10 \* ((Nn" /tmp/qkvpp/coppelius/kernels/cuda/matmul_hopper.cuh
grep -n "nonfinite_check(p, embeddings" /tmp/nfsplit/coppelius/plan/graph.py
grep -n "SPREAD_INFLIGHT = \|__launch_bounds__(256, [0-9])$" /tmp/inf32/coppelius/kernels/cuda/encoder.cuh \
    /tmp/inf128/coppelius/kernels/cuda/encoder.cuh
echo "== schedule_ab small"
AB_ROUNDS=3 timeout 400 python3 bench/experiments/schedule_ab.py "$OUT/ab" small 30 base= qkvpp=tree=/tmp/qkvpp \
    nfsplit=tree=/tmp/nfsplit inf32=tree=/tmp/inf32 inf128=tree=/tmp/inf128 2>&1 | tee "$OUT/ab.log" \
    | grep -E "^round|rror|Traceback"
echo "== ncu encoder_backward (small's sizes)"
timeout 150 ncu --set full --import-source no -k "regex:^encoder_backward$" -c 1 -o "$OUT/enc" python3 -m pytest -q -s \
    -m gpu tests/gpu/test_kernels_gpu.py -k "model_sized and 256" -p no:cacheprovider > "$OUT/enc.log" 2>&1
grep -E "encoder_sort \+|passed|failed" "$OUT/enc.log"
ncu -i "$OUT/enc.ncu-rep" --page details > "$OUT/enc.txt"
ncu -i "$OUT/enc.ncu-rep" --page source --csv --print-source sass -k encoder_backward > "$OUT/enc.csv"
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L2 Hit|Achieved Occupancy|Theoretical Occ|Block Limit|\
Eligible Warps|Issued Warp|No Eligible|Registers Per|Waves" "$OUT/enc.txt"
python3 bench/ncu_hotspots.py "$OUT/enc.csv" --top 20 --window 30 > "$OUT/enc-hot.txt" 2>&1
head -40 "$OUT/enc-hot.txt"
