#!/usr/bin/env bash
# matmul_forward_residual_layernorm under Nsight Compute at small's fc proj (N 16384, C 1536, OC 384), in one device
# call with residual_layernorm.patch applied: its first launch of residual_layernorm_ab.py (card_env.sh's ncu_kernel:
# the details page and the hotspots to $OUT). The question (forty-eighth session): what a k-tile waits on (~2.5 us
# each in the first version against ~1.2 us of delivery) and where the ~23 us besides the k-tiles go.
#     bash bench/experiments/residual_layernorm_profile.sh [CUBIN]      (default: this tree's kernels, compiled here)
set -uo pipefail
source "$(dirname "$0")/card_env.sh"
cubin=${1:-/tmp/fused.cubin}
[ -f "$cubin" ] || cubin . "$cubin" || exit 1
ncu_kernel matmul_forward_residual_layernorm env AB_SHAPES="small fc proj" AB_ROUNDS=1 \
    python3 bench/experiments/residual_layernorm_ab.py "$cubin"
