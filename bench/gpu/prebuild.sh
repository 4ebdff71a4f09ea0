#!/usr/bin/env bash
# bench/gpu/prebuild.sh [DIR] — build libflashc.so for the lent Hopper here (machine code sm_90a
# only: FLASHC_CUDA_ARCHS=90a; Release; no tests or tools; ~3 min on 2 cores, where a fresh
# device machine spends ~150 s of the session's device time on the same build), and leave it as a
# plain file DIR/libflashc.so (default build-h) that the device tool can carry. For calls that
# only bench (they need BUILD_DIR/libflashc.so alone): run with carry ["build-h"] and e.g.
#   bash bench/gpu/s19_head_fwd.sh build-h
# The tests need cmocka and their own binaries: build those on the device (device_call.sh).
# Needs nvcc here (the project's machines have the CUDA 13.0 toolkit the device runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-build-h}
T=${FLASHC_PREBUILD_TREE:-build-prebuild}
mkdir -p "$T"
{ cmake -S . -B "$T" -DCMAKE_BUILD_TYPE=Release -DFLASHC_CUDA_ARCHS=90a -DFLASHC_TESTS=OFF \
    -DFLASHC_TOOLS=OFF -DFLASHC_INSTALL=OFF &&
  cmake --build "$T" -j"$(nproc)" --target flashc; } >"$T/prebuild.log" 2>&1 ||
  { tail -20 "$T/prebuild.log"; echo "prebuild: build failed ($T/prebuild.log)"; exit 1; }
mkdir -p "$DIR"
rm -f "$DIR/libflashc.so"
cp -L "$T/libflashc.so" "$DIR/libflashc.so" # a plain file: the carry takes no links
echo "$DIR/libflashc.so: $(du -h "$DIR/libflashc.so" | cut -f1), $(git describe --always --dirty)"
