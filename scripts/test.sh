#!/usr/bin/env bash
# Builds and runs every test: the C suite under ctest (Release build, then an ASan + UBSan
# build), the Python binding's tests, and the packages as a user gets them
# (scripts/test_packaging.sh: install, examples, pip install ./python). CUDA sources are compiled when nvcc is present;
# GPU tests skip themselves when no GPU is visible. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

echo "== release build + ctest"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFLASHC_TESTS=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j1

echo "== sanitizer build (ASan + UBSan, CUDA off: the CUDA sources are compiled once, above) + ctest"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHC_SANITIZE=ON -DFLASHC_TESTS=ON -DFLASHC_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j1

if [ -x python/run_tests.sh ]; then
    echo "== python binding tests"
    FLASHC_LIBRARY="$PWD/build/libflashc.so" python/run_tests.sh
    echo "== python binding tests on the sanitizer build"
    FLASHC_LIBRARY="$PWD/build-asan/libflashc.so" python/run_tests.sh
fi
echo "== packaging: cmake --install, examples/c (find_package, pkg-config), pip install ./python"
scripts/test_packaging.sh build
echo "== all tests passed"
