# Sourced by the one-call card scripts beside it, from the repository root on the lent card with .whl carried: the
# wheels the card lacks and the trimmed zig installed under /tmp/site, PYTHONPATH set, the card's clocks printed,
# and variant NAME: /tmp/NAME, a fresh copy of this tree (less .whl, .git and exp) to patch or sed into a variant.
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
tar -xJf .whl/ziglang-0.17.1-trimmed.tar.xz -C /tmp/site
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv
variant() {
    rm -rf "/tmp/$1" && mkdir -p "/tmp/$1" &&
        tar -cf - --exclude=./.whl --exclude=./exp --exclude=./.git . | tar -xf - -C "/tmp/$1"
}
# cubin TREE OUT: the kernels of TREE (a tree's root, or a folder that holds kernels.cu) compiled for sm_90 into OUT.
# unpatched PATCH (from the root of a tree that holds PATCH, a path in it, applied): /tmp/base, this tree without it.
# unpatched_cubins PATCH NAME: unpatched, then both trees' cubins, /tmp/base.cubin and /tmp/NAME.cubin, compiled side
# by side.
cubin() {
    local sources=$1
    [ -f "$sources/kernels.cu" ] || sources=$1/coppelius/kernels/cuda
    python3 -c "from pathlib import Path; from coppelius.realize.nvrtc import compile_cubin
Path('$2').write_bytes(compile_cubin('sm_90', Path('$sources'), cached=False)[0])"
}
unpatched() {
    variant base && (cd /tmp/base && patch -s -R -p1 < "$1")
}
unpatched_cubins() {
    unpatched "$1" || return 1
    cubin /tmp/base /tmp/base.cubin & cubin . "/tmp/$2.cubin" & wait
}
# alone NAME LABELS [APART] (after unpatched_cubins): matmul_forward_ab.py's launches whose labels match LABELS (a
# regular expression), /tmp/base.cubin against /tmp/NAME.cubin in one process; APART (any value): each cubin in a
# process of its own tree (/tmp/base's, this one's), where the two trees give the launches different geometry. The
# log is $OUT/alone.txt; its second round (and any "same bits" or error) printed here.
alone() {
    local side tree
    if [ -z "${3:-}" ]; then
        AB_LABELS=$2 timeout 150 python3 bench/experiments/matmul_forward_ab.py /tmp/base.cubin "/tmp/$1.cubin" 2>&1
    else
        for side in base "$1"; do
            tree=$PWD
            [ "$side" = base ] && tree=/tmp/base
            (cd "$tree" && AB_LABELS=$2 PYTHONPATH=/tmp/site:$tree timeout 100 \
                python3 bench/experiments/matmul_forward_ab.py "/tmp/$side.cubin" 2>&1)
        done
    fi | tee "$OUT/alone.txt" | grep -E "^1 |same bits|rror"
}
# tc_tests CUBIN FILTER [SECONDS]: test_tensor_cores_gpu.py's tests matching FILTER (pytest -k) on CUBIN; the log is
# $OUT/tests.txt, its tail printed here. Returns 1 if a test failed or none passed.
tc_tests() {
    COPPELIUS_TC_CUBIN=$1 timeout ${3:-200} python3 -m pytest -m gpu tests/gpu/test_tensor_cores_gpu.py -q \
        -p no:cacheprovider -k "$2" > "$OUT/tests.txt" 2>&1
    echo "== tensor-core tests ($SECONDS s)"; grep -E "^E .*Error|passed|failed" "$OUT/tests.txt" | tail -4
    grep -q " passed" "$OUT/tests.txt" && ! grep -q "failed" "$OUT/tests.txt"
}
# tc_sanitized CUBIN FILTER SECONDS TOOL...: each compute-sanitizer TOOL on the tests matching FILTER on CUBIN; the
# logs are $OUT/TOOL.txt, their last lines printed here.
tc_sanitized() {
    local cubin=$1 filter=$2 seconds=$3 tool
    shift 3
    for tool in "$@"; do
        COPPELIUS_TC_CUBIN=$cubin timeout $seconds compute-sanitizer --tool $tool --report-api-errors no \
            python3 -m pytest -m gpu tests/gpu/test_tensor_cores_gpu.py -q -p no:cacheprovider -k "$filter" \
            > "$OUT/$tool.txt" 2>&1
        echo "== $tool ($SECONDS s)"; tail -1 "$OUT/$tool.txt"
    done
}
# step_ab MODEL ROUNDS SECONDS VARIANT...: MODEL's step A/B of the variants (schedule_ab.py's NAME=[tree=PATH,]...,
# 30 steps, ROUNDS rounds, at most SECONDS), each round's line printed here and kept in $OUT/ab-MODEL.log; the runs'
# trees are removed.
step_ab() {
    local model=$1 rounds=$2 seconds=$3
    shift 3
    echo "== $model ($SECONDS s)"
    AB_ROUNDS=$rounds timeout $seconds python3 bench/experiments/schedule_ab.py "$OUT/ab-$model" $model 30 "$@" 2>&1 |
        grep -E "^round|rror|Traceback" | tee "$OUT/ab-$model.log"
    rm -rf "$OUT/ab-$model"
}
# matmul_checks NAME SHAPES SANITIZED ROUNDS (after unpatched_cubins): /tmp/NAME.cubin's matmul tensor-core tests
# (SHAPES: test ids joined by "or"; empty: all of them), memcheck and racecheck at SANITIZED, then small's step A/B,
# /tmp/base against this tree (schedule_ab.py, ROUNDS rounds); each log under $OUT and its tail here. Returns 1,
# before the sanitizers, if a test failed.
matmul_checks() {
    tc_tests /tmp/$1.cubin "test_matmul${2:+ and ($2)}" || return 1
    tc_sanitized /tmp/$1.cubin "test_matmul and ($3)" 90 memcheck racecheck
    step_ab small $4 200 base=tree=/tmp/base "$1="
}
# attention_alone NAME... (after the NAMEs' cubins, /tmp/NAME.cubin, are built): each NAME's attention forward and
# backward alone (attention_backward_ab.py, one round) in a process of its own tree (/tmp/NAME where that is a folder,
# else this one: each tree's own geometry); the log is $OUT/alone.txt, its times and errors printed here by NAME.
attention_alone() {
    local side tree
    for side in "$@"; do
        tree=$PWD
        [ -d "/tmp/$side" ] && tree=/tmp/$side
        (cd "$tree" && AB_ROUNDS=1 PYTHONPATH=/tmp/site:$tree timeout 60 python3 \
            bench/experiments/attention_backward_ab.py "/tmp/$side.cubin" 2>&1) | tee -a "$OUT/alone.txt" |
            grep -E "forward|B=|rror" | sed "s/^/$side: /"
    done
}
# attention_checks PATCH ROUNDS SECONDS SANITIZER_SECONDS (from the root of a tree with PATCH applied): /tmp/base
# without it, both trees' cubins, the attention tests on the patched one (stop if one failed), each tree's attention
# alone, small's step A/B (ROUNDS rounds, at most SECONDS), then memcheck and racecheck on the attention tests.
# ROUNDS 0: stop after the attention alone.
attention_checks() {
    unpatched_cubins "$1" new || return 1
    tc_tests /tmp/new.cubin attention 120 || return 1
    attention_alone base new
    [ "$2" -gt 0 ] || return 0
    step_ab small "$2" "$3" base=tree=/tmp/base new=
    tc_sanitized /tmp/new.cubin "test_attention and not models and not rtx3090 and not sharp" "$4" memcheck racecheck
}
# not_programmatic NAME GRID: variant NAME with no programmatic edge into or out of a launch of GRID (a Python list,
# e.g. [263, 1, 1]) in formats/geometry.py's rule; prints 1 if the rule took the change.
not_programmatic() {
    variant "$1" || return 1
    sed -i "s/^    if before is None or arch not in PROGRAMMATIC_ARCHS:/    if before == $2 or grid == $2:\\n        return False\\n&/" \
        "/tmp/$1/coppelius/formats/geometry.py"
    grep -c "if before == \\$2" "/tmp/$1/coppelius/formats/geometry.py"
}
# ncu_kernel KERNEL COMMAND...: KERNEL's first launch in COMMAND under `ncu --set full`; the report, the log and the
# SASS source page stay in /tmp/ncu (a call returns 8 files at most), the details page goes to $OUT/KERNEL.txt with
# its key counters printed here, and bench/ncu_hotspots.py's hottest instructions to $OUT/KERNEL-hotspots.txt.
ncu_kernel() {
    local kernel=$1 work=/tmp/ncu
    shift
    mkdir -p "$work"
    timeout 240 ncu --set full --import-source no -k "regex:^$kernel\$" -c 1 -o "$work/$kernel" "$@" \
        > "$work/$kernel.log" 2>&1
    tail -3 "$work/$kernel.log"
    ncu -i "$work/$kernel.ncu-rep" --page details > "$OUT/$kernel.txt"
    ncu -i "$work/$kernel.ncu-rep" --page source --csv --print-source sass -k "$kernel" > "$work/$kernel.csv"
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Theoretical Occ|\
Block Limit|Eligible Warps|Issued Warp|No Eligible|Registers Per|Dynamic Shared|Local" "$OUT/$kernel.txt"
    python3 bench/ncu_hotspots.py "$work/$kernel.csv" --top 25 --window 40 | tee "$OUT/$kernel-hotspots.txt" | head -60
}
