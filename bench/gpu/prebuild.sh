#!/usr/bin/env bash
# bench/gpu/prebuild.sh [DIR] — build libflashc.so for the lent Hopper here (machine code sm_90a
# only: FLASHC_CUDA_ARCHS=90a; Release; no tools; ~3 min on 2 cores, where a fresh device machine
# spends ~150 s of the session's device time on the same build), and leave it as a plain file
# DIR/libflashc.so (default build-h) that the device tool can carry. For calls that only bench
# (they need BUILD_DIR/libflashc.so alone): run with carry ["build-h"] and e.g.
#   bash bench/gpu/s19_head_fwd.sh build-h
# FLASHC_PREBUILD_TESTS="test_cuda_attn_bwd ..." also builds those test binaries (cmocka from
# FLASHC_DEPS, a folder made by bench/gpu/stage.sh, e.g. .xfer/deps) and packs the stripped
# library and tests into DIR/pk.tar.xz alone (xz: ~10 MB for the library and one test, where
# the plain files pass the carry's 64 MiB); the device scripts' s_begin (s_common.sh) unpacks it
# into DIR/libflashc.so and DIR/tests/NAME. Carry ["build-h", ".xfer/deps"] then (the tests link
# cmocka: LD_LIBRARY_PATH=$PWD/.xfer/deps/lib on the device).
# Needs nvcc here (the project's machines have the CUDA 13.0 toolkit the device runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-build-h}
T=${FLASHC_PREBUILD_TREE:-build-prebuild}
TESTS=${FLASHC_PREBUILD_TESTS:-}
mkdir -p "$T"
if [ -n "$TESTS" ]; then
  export PKG_CONFIG_PATH="${FLASHC_DEPS:?FLASHC_PREBUILD_TESTS needs FLASHC_DEPS (cmocka)}/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  ON=ON
else
  ON=OFF
fi
# shellcheck disable=SC2086
{ cmake -S . -B "$T" -DCMAKE_BUILD_TYPE=Release -DFLASHC_CUDA_ARCHS=90a -DFLASHC_TESTS=$ON \
    -DFLASHC_TOOLS=OFF -DFLASHC_INSTALL=OFF &&
  cmake --build "$T" -j"$(nproc)" --target flashc $TESTS; } >"$T/prebuild.log" 2>&1 ||
  { tail -20 "$T/prebuild.log"; echo "prebuild: build failed ($T/prebuild.log)"; exit 1; }
mkdir -p "$DIR"
rm -rf "$DIR/libflashc.so" "$DIR/tests" "$DIR/pk.tar.xz"
if [ -z "$TESTS" ]; then
  cp -L "$T/libflashc.so" "$DIR/libflashc.so" # a plain file: the carry takes no links
  echo "$DIR/libflashc.so: $(du -h "$DIR/libflashc.so" | cut -f1), $(git describe --always --dirty)"
  exit 0
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests"
cp -L "$T/libflashc.so" "$stage/libflashc.so"
for t in $TESTS; do cp -L "$T/tests/$t" "$stage/tests/$t"; done
strip --strip-unneeded "$stage/libflashc.so" "$stage"/tests/*
tar -C "$stage" -cJf "$DIR/pk.tar.xz" .
echo "$DIR/pk.tar.xz: $(du -h "$DIR/pk.tar.xz" | cut -f1) (libflashc.so, tests: $TESTS), $(git describe --always --dirty)"
