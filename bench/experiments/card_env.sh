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
# cubin TREE OUT: TREE's kernels compiled for sm_90 into OUT. unpatched_cubins PATCH NAME (from the root of a tree
# that holds PATCH applied): /tmp/base, this tree without PATCH, and both trees' cubins, /tmp/base.cubin and
# /tmp/NAME.cubin, compiled side by side.
cubin() {
    (cd "$1" && python3 -c "from coppelius.realize.nvrtc import compile_cubin
open('$2', 'wb').write(compile_cubin('sm_90', cached=False)[0])")
}
unpatched_cubins() {
    variant base && (cd /tmp/base && patch -s -R -p1 < "$1") || return 1
    cubin /tmp/base /tmp/base.cubin & cubin . "/tmp/$2.cubin" & wait
}
