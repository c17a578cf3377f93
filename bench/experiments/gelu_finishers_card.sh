#!/usr/bin/env bash
# Are the gelu epilogues bound by their finishers' work (forty-fifth session)? One lent-card call from the repository
# root, carry [".whl"], logs under $OUT (~2 minutes warm): cubins of this tree and of variants, compiled in parallel
# on the card, timed by gelu_epilogues.py (each launch alone, small's and gpt2's fc shapes): nomath (the finishers
# store the products as value and slope, and the backward's products unmultiplied: what the gelu's arithmetic
# costs), the consumers' own gelu rows at short K (HOP_GELU_ROWS_SHORT_K 20 / 36 / 44, this tree 28) and the gelu
# backward's (HOP_GELU_BACKWARD_ROWS_SHORT_K 8 / 24, this tree 16), measured on the H200 only until now.
set -u
source "$(dirname "$0")/card_env.sh"
build() {  # NAME SED-EXPRESSION: /tmp/v/NAME.cubin from this tree's kernels with the expression applied
    local src=/tmp/src-$1
    rm -rf $src && cp -r coppelius/kernels/cuda $src && sed -i "$2" $src/matmul_hopper.cuh && cubin $src /tmp/v/$1.cubin
}
mkdir -p /tmp/v
build base "s/^//" &
nomath="s/g0 = cpl::gelu_value_slope(a.x), g1 = cpl::gelu_value_slope(a.y);/g0 = {a.x, a.x}, g1 = {a.y, a.y};/"
nomath+="; s/w\[j\] = cpl::gelu_backward_pair(w\[j\], x\[j\]);/w[j] = __hmax2(w[j], x[j]);/"
build nomath "$nomath" &
for r in 20 36 44; do build fr$r "s/HOP_GELU_ROWS_SHORT_K = 28,/HOP_GELU_ROWS_SHORT_K = $r,/" & done
for r in 8 24; do build br$r "s/HOP_GELU_BACKWARD_ROWS_SHORT_K = 16,/HOP_GELU_BACKWARD_ROWS_SHORT_K = $r,/" & done
wait
ls -la /tmp/v
for v in nomath fr20 br8; do
    cmp -s /tmp/v/base.cubin /tmp/v/$v.cubin && echo "$v: the same cubin as base (sed missed)"
done
timeout 300 python3 bench/experiments/gelu_epilogues.py /tmp/v/base.cubin /tmp/v/nomath.cubin /tmp/v/fr20.cubin \
    /tmp/v/fr36.cubin /tmp/v/fr44.cubin /tmp/v/br8.cubin /tmp/v/br24.cubin 2>&1 | tee "$OUT/gelu_epilogues.log"
