#!/usr/bin/env bash
# What a persistent matmul's k-tile waits on at the full grid against half of it, and what cuBLAS's kernel does at
# the same shape (the forty-fifth session's "Left": the matmuls at 132 SMs sit at a ceiling the SMs share, which
# neither multicast nor a 128 x 384 tile lifted). One lent-card call from the repository root, carry [".whl"], logs
# under $OUT (~4 minutes warm): Nsight Compute's full set on small's fc proj forward (the ping-pong, K 1536) cut to
# G = 132 and G = 66 blocks (matmul_sm_scaling.py), and on the kernel cuBLAS takes there (cublas_shapes.py); then
# each report's headline figures and its warps' stall reasons (a warp's cycles a issued instruction, by reason).
set -u
source "$(dirname "$0")/card_env.sh"
profile() {  # NAME KERNEL-REGEX COMMAND...: one launch's report's pages as text under $OUT (the report itself and
    # ncu's log stay in /tmp: the lent card returns only eight files a call)
    local name=$1 kernel=$2
    shift 2
    timeout 240 ncu --set full -k "regex:$kernel" -c 1 -f -o "/tmp/$name" "$@" > "/tmp/$name.log" 2>&1
    ncu -i "/tmp/$name.ncu-rep" --page details > "$OUT/$name-details.txt" 2>&1
    ncu -i "/tmp/$name.ncu-rep" --page raw --csv > "$OUT/$name-raw.csv" 2>&1
}
profile pingpong-g132 matmul_forward python3 bench/experiments/matmul_sm_scaling.py "fc proj" 132
profile pingpong-g66 matmul_forward python3 bench/experiments/matmul_sm_scaling.py "fc proj" 66
profile cublas nvjet python3 bench/experiments/cublas_shapes.py "small fc proj"
python3 - "$OUT" <<'PY'
import csv
import sys
from pathlib import Path

out = Path(sys.argv[1])
HEADLINES = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "L2 Cache Throughput",
             "L1/TEX Cache Throughput", "DRAM Throughput", "Warp Cycles Per Issued Instruction", "Issue Slots Busy",
             "Registers Per Thread", "Dynamic Shared Memory Per Block", "Grid Size", "Cluster Size")
for name in ("pingpong-g132", "pingpong-g66", "cublas"):
    print(f"== {name}")
    for line in (out / f"{name}-details.txt").read_text(errors="replace").splitlines():
        if line.strip().startswith(HEADLINES):
            print("  " + " ".join(line.split()))
    rows = list(csv.reader((out / f"{name}-raw.csv").open(errors="replace")))
    if len(rows) < 3:
        continue
    head, tail = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    stalls = sorted(((float(v.replace(",", "")), k[len(head):-len(tail)]) for k, v in zip(rows[0], rows[2])
                     if k.startswith(head) and k.endswith(tail) and v.replace(",", "").replace(".", "", 1).isdigit()),
                    reverse=True)
    print("  stalls (warps a issued instruction): " + ", ".join(f"{k} {v:.2f}" for v, k in stalls[:8]))
PY
