#!/usr/bin/env bash
# matmul_forward_residual_layernorm under Nsight Compute at small's fc proj (N 16384, C 1536, OC 384), in one device
# call with residual_layernorm.patch applied: its first launch of residual_layernorm_ab.py (--set full), the details
# page (to $OUT) and the SASS source page read by bench/ncu_hotspots.py (its hotspots to $OUT). The question
# (forty-eighth session): what a k-tile waits on (~2.5 us each in the first version against ~1.2 us of delivery) and
# where the ~23 us besides the k-tiles go.
#     bash bench/experiments/residual_layernorm_profile.sh [CUBIN]      (default: this tree's kernels, compiled here)
set -uo pipefail
source "$(dirname "$0")/card_env.sh"
cubin=${1:-/tmp/fused.cubin}
[ -f "$cubin" ] || cubin . "$cubin" || exit 1
kernel=matmul_forward_residual_layernorm
work=/tmp/residual_layernorm_profile  # the report and the SASS page stay on the card: a call returns 8 files at most
mkdir -p "$work"
AB_SHAPES="small fc proj" AB_ROUNDS=1 timeout 240 ncu --set full --import-source no -k "regex:^$kernel\$" -c 1 \
    -o "$work/$kernel" python3 bench/experiments/residual_layernorm_ab.py "$cubin" > "$work/$kernel.log" 2>&1
tail -3 "$work/$kernel.log"
ncu -i "$work/$kernel.ncu-rep" --page details > "$OUT/$kernel.txt"
ncu -i "$work/$kernel.ncu-rep" --page source --csv --print-source sass -k "$kernel" > "$work/$kernel.csv"
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Hit|L2 Hit|Eligible Warps|Issued Warp|No Eligible|\
Registers Per|Dynamic Shared|Local" "$OUT/$kernel.txt"
python3 bench/ncu_hotspots.py "$work/$kernel.csv" --top 25 --window 40 | tee "$OUT/$kernel-hotspots.txt" | head -60
