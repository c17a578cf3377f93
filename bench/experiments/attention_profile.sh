#!/usr/bin/env bash
# The attention kernels at small's shape (B 64, T 256, C 384, NH 6) under Nsight Compute, in one device call: each
# kernel's first launch of attention_backward_ab.py (card_env.sh's ncu_kernel: the key counters and the hottest
# instructions printed here, the details pages and hotspots under $OUT). At T = 256 the bytes are the floor (12.0 us
# forward, 23.9 us backward at 4.22 TB/s against ~27 and ~68 measured): the first question is what a block waits
# on. From the repository root on the card, carry [".whl"]; ~3 minutes.
#     bash bench/experiments/attention_profile.sh [CUBIN]      (default: this tree's kernels, compiled here)
set -uo pipefail
source "$(dirname "$0")/card_env.sh"
cubin=${1:-/tmp/attention_profile.cubin}
[ -f "$cubin" ] || cubin . "$cubin" || exit 1
for kernel in attention_forward attention_backward; do
    echo "== $kernel"
    ncu_kernel $kernel env AB_SHAPES=small python3 bench/experiments/attention_backward_ab.py "$cubin"
done
