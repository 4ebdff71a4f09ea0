#!/usr/bin/env bash
# bench/gpu/run.sh — everything the CUDA backend needs checked on a GPU machine, in one go:
#   1. build (Release, sm_80 + sm_90a) unless FLASHC_BUILD names a finished build directory;
#      FLASHC_DEPS names a folder made by bench/gpu/stage.sh when the machine lacks cmocka
#   2. the GPU correctness suite (tests/test_cuda_attn)
#   3. compute-sanitizer memcheck and racecheck on its short cases (FLASHC_TEST_SMALL=1)
#   4. the comparison with PyTorch SDPA (flash and cuDNN backends), bench/gpu/bench_sdpa.py
# Logs and bench.json go to $OUT (default build-gpu/out); the table is printed last.
# Exit status: nonzero if any step failed (later steps still run, so one call tells all).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
BUILD=${FLASHC_BUILD:-}
status=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv 2>&1 | tee "$OUT/gpu.txt"

if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if [ -z "$BUILD" ]; then
  BUILD=build-gpu
  step "build"
  { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$BUILD" -j "$(nproc)"; } >"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; echo "build failed"; exit 1; }
  grep -E "spill|registers" "$OUT/build.log" | sort -u | head -20
fi

step "GPU tests"
"$BUILD/tests/test_cuda_attn" 2>&1 | tee "$OUT/tests.log" | grep -vE "^  (bf16|fp16) D=" 
[ "${PIPESTATUS[0]}" = 0 ] || { status=1; echo "GPU TESTS FAILED"; }

if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    step "compute-sanitizer $tool (short cases)"
    FLASHC_TEST_SMALL=1 timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$BUILD/tests/test_cuda_attn" >"$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    tail -4 "$OUT/sanitizer-$tool.log"
    [ $rc = 0 ] || { status=1; echo "SANITIZER $tool FAILED (rc $rc)"; }
  done
else
  echo "compute-sanitizer not found: skipped"
fi

step "benchmark vs PyTorch SDPA"
PYTHONUNBUFFERED=1 python3 bench/gpu/bench_sdpa.py --lib "$BUILD/libflashc.so" \
  --out "$OUT/bench.json" ${FLASHC_BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
