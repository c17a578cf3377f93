#!/usr/bin/env bash
# Why the resident attention_backward (two blocks an SM) lost ~0.38 ms of small's step where the kernel alone lost
# ~13 us a layer (fifty-second session): small's step A/B of the tree without the patch, the patched one, and the
# patched one with the edges into and out of its 263-block grid not programmatic, and the base with the resident
# forward at 389 blocks (three an SM: does its grid crowd its neighbours?); then small's timeline
# (bench/timeline.py: each kernel's in-graph time) on the patched tree. One lent-card call from the root with
# bench/experiments/attention_resident_backward.patch applied, carry [".whl"] (~5 minutes warm).
set -u
source "$(dirname "$0")/card_env.sh"
tar -xJf .whl/timeline.tar.xz -C .
unpatched bench/experiments/attention_resident_backward.patch || exit 1
not_programmatic nopdl "[263, 1, 1]"
# and the resident forward's grid at three blocks an SM (the base's backward): room beside its neighbours
rm -rf /tmp/fwd389 && cp -r /tmp/base /tmp/fwd389 &&
    sed -i "s/^ATTENTION_FORWARD_RESIDENT = 523/ATTENTION_FORWARD_RESIDENT = 389/" /tmp/fwd389/coppelius/formats/geometry.py
grep -c "^ATTENTION_FORWARD_RESIDENT = 389" /tmp/fwd389/coppelius/formats/geometry.py
step_ab small 2 240 base=tree=/tmp/base new= nopdl=tree=/tmp/nopdl fwd389=tree=/tmp/fwd389
mkdir -p "$OUT/new"
left=$((${LIMIT:-400} - SECONDS))
echo "== timeline ($left s left)"
[ $left -gt 50 ] && timeout $left python3 bench/timeline.py --models small --out "$OUT/new" > "$OUT/new/timeline.log" 2>&1
tail -3 "$OUT"/new/timeline.log
grep -E "^\| attention|^Median" "$OUT"/new/timeline-*.md
