#!/usr/bin/env bash
# Fills .whl/ (git-ignored through .git/info/exclude) with what the lent H200's python3 (3.12, no network) lacks
# for the whole pipeline, for bench/gpu_session.sh and one-off device calls to install:
#   python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl
#   tar -xJf .whl/ziglang-*-trimmed.tar.xz -C /tmp/site; export PYTHONPATH=/tmp/site:$PWD
# The wheels are this checkout's venv's versions (.venv, pyproject's pins), downloaded for cp312; zig is the venv's
# ziglang package trimmed to the Linux x86-64 and AArch64 glibc targets, so that the tree and .whl fit a carry
# (64 MiB): about 44 MB.
#   bench/device_wheels.sh            (from the repository root, after the README's install)
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
version() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
wheels=()
for pkg in pyelftools jsonschema jsonschema-specifications referencing rpds-py; do wheels+=("$pkg==$(version "$pkg")"); done
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "${wheels[@]}"
zig=$(version ziglang)
site=$("$py" -c "import ziglang, os; print(os.path.dirname(os.path.dirname(ziglang.__file__)))")
keep="aarch64-linux-any aarch64-linux-gnu x86-linux-any x86-linux-gnu any-linux-any generic-glibc"
# C only: no C++ runtime, unwinder or docs (the carry's 64 MiB holds the tree and .whl with little to spare)
excludes=(--exclude=__pycache__ --exclude=ziglang/lib/libtsan --exclude=ziglang/lib/libcxx --exclude=ziglang/lib/libcxxabi
          --exclude=ziglang/lib/libunwind --exclude=ziglang/lib/docs --exclude=ziglang/lib/build-web
          --exclude=ziglang/lib/lldb --exclude=ziglang/lib/init)
for libc in mingw wasi musl darwin freebsd netbsd openbsd; do excludes+=("--exclude=ziglang/lib/libc/$libc"); done
for dir in "$site"/ziglang/lib/libc/include/*; do
    case " $keep " in *" $(basename "$dir") "*) ;; *) excludes+=("--exclude=ziglang/lib/libc/include/$(basename "$dir")") ;; esac
done
# the dist-info too: coppelius/host/build.py reads zig's version from it
tar -cJf ".whl/ziglang-$zig-trimmed.tar.xz" -C "$site" "${excludes[@]}" ziglang "ziglang-$zig.dist-info"
du -sh .whl
