#!/usr/bin/env bash
# Whether today's programmatic edges pay (forty-ninth session: the fused projection's four new edges cost small
# ~70 us a step, bench/results/residual_layernorm-2026-12-06-h100-s49.txt). One lent-card call from the root of a
# clean tree, carry [".whl"] (~6 minutes warm; LIMIT: the seconds the A/Bs may take, default 450): small's and
# tiny's step A/B (schedule_ab.py, 2 rounds) of this tree (base: geometry.programmatic's rule), this tree with no
# programmatic edge (none), with every launch-after-launch edge programmatic (every: PROGRAMMATIC_BLOCKS_PER_SM
# unbounded), and with edges only where both grids together fit the SMs (fit: the dependent's blocks start on SMs
# the predecessor leaves idle; tiny keeps 43 of its 51 edges, small 13 of 50, gpt2-124m 24 of 97). With PHASES=1,
# first residual_layernorm_phases.py on a copy with residual_layernorm.patch applied.
set -u
source "$(dirname "$0")/card_env.sh"
if [ -n "${PHASES:-}" ]; then
    variant fused && (cd /tmp/fused && patch -s -p1 < bench/experiments/residual_layernorm.patch &&
        PYTHONPATH=/tmp/site:/tmp/fused timeout 120 python3 bench/experiments/residual_layernorm_phases.py) 2>&1 |
        tee "$OUT/phases.txt"
fi
for name in base none every fit; do
    variant $name
done
sed -i 's/^PROGRAMMATIC_ARCHS = ("sm_90", "sm_121")/PROGRAMMATIC_ARCHS = ()/' /tmp/none/coppelius/formats/geometry.py
sed -i 's/^PROGRAMMATIC_BLOCKS_PER_SM = 4 /PROGRAMMATIC_BLOCKS_PER_SM = 10**6 /' \
    /tmp/every/coppelius/formats/geometry.py
rule='    return max(grid_blocks(before), grid_blocks(grid)) <= blocks_per_sm \* sm_count'
sed -i "s/^$rule\$/    return grid_blocks(before) + grid_blocks(grid) <= sm_count/" /tmp/fit/coppelius/formats/geometry.py
grep -h "^PROGRAMMATIC" /tmp/none/coppelius/formats/geometry.py /tmp/every/coppelius/formats/geometry.py
grep -c "return grid_blocks(before) + grid_blocks(grid) <= sm_count" /tmp/fit/coppelius/formats/geometry.py || exit 1
for model in small tiny; do
    step_ab $model 2 $((${LIMIT:-450} - SECONDS)) base=tree=/tmp/base none=tree=/tmp/none every=tree=/tmp/every \
        fit=tree=/tmp/fit
done
