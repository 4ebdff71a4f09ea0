#!/usr/bin/env bash
# Builds and runs every test: the C suite under ctest (Release build, then an ASan + UBSan
# build with allocation fault injection), the Python binding's tests, and the packages as a
# user gets them (scripts/test_packaging.sh: install, examples, pip install ./python). CUDA
# sources are compiled when nvcc is present (the Release build only); GPU tests skip themselves
# when no GPU is visible. Then, each with CUDA off: a ThreadSanitizer build running the thread
# test, the libFuzzer targets (fuzz/run.sh), and the suite cross-built for AArch64 under
# qemu-user (the NEON kernels). FLASHC_SKIP="tsan fuzz neon" leaves steps out. Exits non-zero on
# any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

skip() { case " ${FLASHC_SKIP:-} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
step() { echo "== $1 ($(date -u +%T))"; }

step "release build + ctest"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFLASHC_TESTS=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j1

step "sanitizer build (ASan + UBSan, CUDA off: compiled once above; fault injection) + ctest"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHC_SANITIZE=ON -DFLASHC_TESTS=ON \
    -DFLASHC_CUDA=OFF -DFLASHC_FAULT_INJECTION=ON >/dev/null
cmake --build build-asan -j"$jobs"
# allocator_may_return_null: the bound tests ask for 2^62-byte buffers on purpose and expect the
# library's FLASHC_ERR_OUT_OF_MEMORY, which ASan would otherwise preempt by aborting
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j1

if [ -x python/run_tests.sh ]; then
    echo "== python binding tests"
    FLASHC_LIBRARY="$PWD/build/libflashc.so" python/run_tests.sh
    echo "== python binding tests on the sanitizer build"
    FLASHC_LIBRARY="$PWD/build-asan/libflashc.so" python/run_tests.sh
fi
if ! skip tsan; then
    # clang's ThreadSanitizer; the thread test holds OpenMP at one thread per call (why: see
    # tests/test_threads.c), so neither libgomp nor libomp barriers are involved.
    step "ThreadSanitizer build (clang) + the thread test"
    CC=clang cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHC_CUDA=OFF \
        -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" >/dev/null
    cmake --build build-tsan -j"$jobs" --target test_threads
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        ctest --test-dir build-tsan --output-on-failure -R '^test_threads$'
fi

if ! skip fuzz; then
    step "libFuzzer targets (ASan + UBSan), ${FLASHC_FUZZ_SECONDS:-40} s each"
    # any finding (sanitizer report, violated oracle, timeout, OOM) fails CI
    fuzz/run.sh
fi

if ! skip neon; then
    # NEON kernels: cross-built with Debian's aarch64 gcc, the whole default ctest suite under
    # qemu-aarch64 (the default path there is neon; see cmake/aarch64-linux-gnu.cmake)
    step "AArch64 cross build (NEON) + ctest under qemu-user"
    cmake -S . -B build-neon -DCMAKE_BUILD_TYPE=Release -DFLASHC_CUDA=OFF \
        -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake >/dev/null
    cmake --build build-neon -j"$jobs"
    ctest --test-dir build-neon --output-on-failure -j"$jobs"
fi
step "packaging: cmake --install, examples/c (find_package, pkg-config), pip install ./python"
scripts/test_packaging.sh build

step "all tests passed"
