#!/usr/bin/env bash
# Builds .timeline/ on this machine (it needs PyPI; the lent card's machine has no network): CUPTI's library from the
# pinned nvidia-cuda-cupti-cu12 wheel and cupti_timeline.so, the injection library bench/timeline.py runs the native
# host with; and the two packed into .whl/timeline.tar.xz (1.7 MB), which travels with the carried ".whl" and which
# bench/timeline.py unpacks on the card (".timeline" itself, 7.6 MB, no longer fits beside .whl and the tree in a
# carry's 64 MiB).
#   bash bench/timeline/build.sh
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# CUPTI's library and headers; the CUDA headers cupti.h includes (cuda.h, builtin_types.h and nvcc's crt/)
"$python" -m pip download -q --no-deps -d "$work" nvidia-cuda-cupti-cu12==12.9.79 nvidia-cuda-runtime-cu12==12.9.79 \
    nvidia-cuda-nvcc-cu12==12.9.86
for wheel in "$work"/*.whl; do (cd "$work" && unzip -q -o "$wheel"); done
cupti="$work/nvidia/cuda_cupti"
mkdir -p "$root/.timeline"
cp "$cupti/lib/libcupti.so.12" "$root/.timeline/"
"$python" -m ziglang cc -target x86_64-linux-gnu.2.28 -shared -fPIC -O2 -Wall -Werror \
    -I "$cupti/include" -I "$work/nvidia/cuda_runtime/include" -I "$work/nvidia/cuda_nvcc/include" \
    "$root/bench/timeline/cupti_timeline.c" \
    -L "$root/.timeline" -l:libcupti.so.12 -Wl,-rpath,'$ORIGIN' -o "$root/.timeline/cupti_timeline.so"
mkdir -p "$root/.whl"
tar -cJf "$root/.whl/timeline.tar.xz" -C "$root" .timeline
ls -la "$root/.timeline" "$root/.whl/timeline.tar.xz"
