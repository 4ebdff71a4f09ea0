#!/usr/bin/env bash
# bench/gpu/run_bwd.sh — the CUDA backward's check on a GPU machine, in one go (a short device
# call; bench/gpu/run.sh is the whole-project check):
#   1. build the library and tests/test_cuda_attn_bwd (Release, sm_80 + sm_90a); the backward
#      kernels' ptxas lines (registers, spills) are printed
#   2. tests/test_cuda_attn_bwd, and at the same time compute-sanitizer memcheck and racecheck on
#      its short cases (FLASHC_TEST_SMALL=1; the sanitizers use the GPU lightly, the test's
#      float64 references the CPU)
#   3. the Python binding's CUDA tests (python/tests/test_torch.py -k cuda), with pytest from
#      wheels in $FLASHC_WHEELS when the machine has none
#   4. bench/gpu/bench_bwd.py (flashc vs SDPA math / flash / mem_eff / cuDNN), tables last
# FLASHC_DEPS: a folder made by bench/gpu/stage.sh (cmocka). FLASHC_SKIP="tests sanitizer
# python bench" leaves steps out; FLASHC_BWD_BENCH_ARGS is passed to bench_bwd.py.
# Logs and bwd.json go to $OUT (default build-gpu/out). Exit status nonzero if a step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
BUILD=build-gpu
status=0
skip() { case " ${FLASHC_SKIP:-} " in *" $1 "*) echo "(skipped: $1)"; return 0;; esac; return 1; }
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv 2>&1 | tee "$OUT/gpu.txt"
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

step "build"
{ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release &&
  cmake --build "$BUILD" -j "$(nproc)" --target flashc test_cuda_attn_bwd; } >"$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; echo "build failed"; exit 1; }
grep -E "spill" "$OUT/build.log" | grep attn_bwd | sort -u | sed 's/ptxas warning : //' | head -12

san_pids=()
if ! skip sanitizer && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    ( FLASHC_TEST_SMALL=1 OMP_NUM_THREADS=2 timeout 150 compute-sanitizer --tool "$tool" \
        --error-exitcode 9 "$BUILD/tests/test_cuda_attn_bwd" >"$OUT/sanitizer-$tool.log" 2>&1
      echo $? >"$OUT/sanitizer-$tool.rc" ) &
    san_pids+=($!)
  done
fi

if ! skip tests; then
  step "GPU backward tests"
  timeout 200 "$BUILD/tests/test_cuda_attn_bwd" >"$OUT/tests.log" 2>&1
  rc=$?
  grep -E "^\[ *(PASSED|FAILED|  OK|  FAILED|  ERROR) *\]|det=|graph|error|Error|> 2 x" "$OUT/tests.log" | head -40
  [ $rc = 0 ] || { status=1; echo "GPU BACKWARD TESTS FAILED (rc $rc)"; }
fi

for pid in "${san_pids[@]}"; do wait "$pid"; done
for tool in memcheck racecheck; do
  [ -f "$OUT/sanitizer-$tool.rc" ] || continue
  rc=$(cat "$OUT/sanitizer-$tool.rc")
  step "compute-sanitizer $tool (short cases): rc $rc"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitizer-$tool.log" | tail -4
  [ "$rc" = 0 ] || { status=1; echo "SANITIZER $tool FAILED"; }
done

if ! skip python; then
  step "Python binding, CUDA tests"
  if ! python3 -c "import pytest" 2>/dev/null && [ -n "${FLASHC_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --find-links "$FLASHC_WHEELS" --target "$PWD/.pytest-lib" \
      pytest >"$OUT/pip.log" 2>&1
    export PYTHONPATH="$PWD/.pytest-lib${PYTHONPATH:+:$PYTHONPATH}"
  fi
  FLASHC_LIBRARY="$PWD/$BUILD/libflashc.so" PYTHONPATH="$PWD/python:${PYTHONPATH:-}" \
    timeout 120 python3 -m pytest python/tests/test_torch.py python/tests/test_library.py -q -rs \
    -k "cuda or ctypes" >"$OUT/pytest.log" 2>&1 || { status=1; echo "PYTHON TESTS FAILED"; }
  tail -8 "$OUT/pytest.log"
fi

skip bench && exit $status
step "benchmark vs PyTorch SDPA"
PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1 timeout 300 python3 bench/gpu/bench_bwd.py \
  --lib "$BUILD/libflashc.so" --out "$OUT/bwd.json" ${FLASHC_BWD_BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
