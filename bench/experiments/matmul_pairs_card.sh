#!/usr/bin/env bash
# The forwards' 128x256 tiles in pairs (a cluster of 2 sharing B's k-tiles by TMA multicast;
# bench/experiments/matmul_pairs.patch, forty-fifth session), checked and timed in one lent-card call from the root of
# the patched tree, carry [".whl"], logs under $OUT (~8 minutes warm): both cubins compiled here; the matmul
# tensor-core tests and racecheck on the patched one; small's step A/B (schedule_ab.py, 3 rounds); each cubin's
# launches alone from its own tree (card_env.sh's alone).
set -u
source "$(dirname "$0")/card_env.sh"
unpatched_cubins bench/experiments/matmul_pairs.patch pairs || exit 1
matmul_checks pairs "" "8999-96-1000 or 9000-136-200" 3 || exit 1
alone pairs 'gelu|lm head|gpt2 qkv' apart
