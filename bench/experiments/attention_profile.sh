#!/usr/bin/env bash
# The attention kernels at small's shape (B 64, T 256, C 384, NH 6) under Nsight Compute, in one device call: each
# kernel's first launch of attention_backward_ab.py (--set full), its details page and its SASS source page, read by
# bench/ncu_hotspots.py; the key counters and the hottest instructions printed here, the rest under $OUT. At T = 256
# the bytes are the floor (12.0 us forward, 23.9 us backward at 4.22 TB/s against ~27 and ~68 measured): the first
# question is what a block waits on. From the repository root on the card, the carried wheels installed; ~3 minutes.
#     bash bench/experiments/attention_profile.sh [CUBIN]      (default: this tree's kernels, compiled here)
set -uo pipefail
cubin=${1:-/tmp/attention_profile.cubin}
[ -f "$cubin" ] || python3 -c "from pathlib import Path; from coppelius.realize.nvrtc import compile_cubin
Path('$cubin').write_bytes(compile_cubin('sm_90')[0])" || exit 1
for kernel in attention_forward attention_backward; do
    echo "== $kernel"
    AB_SHAPES=small timeout 240 ncu --set full --import-source no -k "regex:^$kernel\$" -c 1 -o "$OUT/$kernel" \
        python3 bench/experiments/attention_backward_ab.py "$cubin" > "$OUT/$kernel.log" 2>&1
    tail -3 "$OUT/$kernel.log"
    ncu -i "$OUT/$kernel.ncu-rep" --page details > "$OUT/$kernel.txt"
    ncu -i "$OUT/$kernel.ncu-rep" --page source --csv --print-source sass -k "$kernel" > "$OUT/$kernel.csv"
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Theoretical Occ|\
Block Limit|Eligible Warps|Issued Warp|No Eligible|Registers Per|Dynamic Shared" "$OUT/$kernel.txt"
    python3 bench/ncu_hotspots.py "$OUT/$kernel.csv" --top 25 --window 40 | tee "$OUT/$kernel-hotspots.txt" | head -60
done
