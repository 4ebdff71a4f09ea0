#!/usr/bin/env bash
# bench/gpu/run_bwd.sh — the CUDA backward's check on a GPU machine, in one go (a short device
# call; bench/gpu/run.sh is the whole-project check):
#   1. build the library and tests/test_cuda_attn_bwd (Release, sm_80 + sm_90a), unless
#      FLASHC_BUILD names a finished build directory (built elsewhere with the same nvcc and
#      carried); the backward kernels' ptxas spill lines are printed
#   2. at the same time, on the GPU lightly and the CPU heavily (the float64 references):
#      tests/test_cuda_attn_bwd with the dispatcher's choice (sm90 at d = 128 on Hopper);
#      the d = 128 suites again with FLASHC_CUDA_BWD_KERNEL=sm80; compute-sanitizer on the short
#      cases (FLASHC_TEST_SMALL=1), one job per FLASHC_SAN_JOBS entry "tool:test-pattern"
#      (default memcheck on the d = 128 suites and the modifiers, racecheck on bf16 d = 128)
#   3. the Python binding's CUDA tests (python/tests/test_torch.py -k cuda), with pytest from
#      wheels in $FLASHC_WHEELS when the machine has none
#   4. bench/gpu/bench_bwd.py (flashc vs SDPA flash / cuDNN), alone on the GPU, tables last
# FLASHC_DEPS: a folder made by bench/gpu/stage.sh (cmocka). FLASHC_SKIP="tests sanitizer
# python bench" leaves steps out; FLASHC_BWD_BENCH_ARGS is passed to bench_bwd.py;
# FLASHC_TEST_TIMEOUT / FLASHC_BENCH_TIMEOUT bound steps 2 and 4 (seconds).
# Logs and bwd.json go to $OUT (default build-gpu/out). Exit status nonzero if a step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
BUILD=${FLASHC_BUILD:-build-gpu}
status=0
skip() { case " ${FLASHC_SKIP:-} " in *" $1 "*) echo "(skipped: $1)"; return 0;; esac; return 1; }
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
TT=${FLASHC_TEST_TIMEOUT:-200}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv 2>&1 | tee "$OUT/gpu.txt"
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if [ -z "${FLASHC_BUILD:-}" ]; then
  step "build"
  { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$BUILD" -j "$(nproc)" --target flashc test_cuda_attn_bwd; } >"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; echo "build failed"; exit 1; }
  grep -E "spill" "$OUT/build.log" | grep attn_bwd | sort -u | sed 's/ptxas warning : //' | head -12
fi
TEST=$BUILD/tests/test_cuda_attn_bwd
[ -x "$TEST" ] || TEST=$BUILD/test_cuda_attn_bwd

# name, environment, command: each a background job whose log and status land in $OUT
pids=() names=()
job() {
  local name=$1; shift
  ( timeout "$TT" env "$@" >"$OUT/$name.log" 2>&1; echo $? >"$OUT/$name.rc" ) &
  pids+=($!) names+=("$name")
}
if ! skip tests; then
  step "GPU backward tests, sanitizers (in parallel)"
  job tests OMP_NUM_THREADS=8 "$TEST"
  job tests-sm80-d128 OMP_NUM_THREADS=4 FLASHC_CUDA_BWD_KERNEL=sm80 FLASHC_TEST_FILTER="test_*d128" "$TEST"
fi
if ! skip sanitizer && command -v compute-sanitizer >/dev/null; then
  # one job per (tool, test-name pattern); --report-api-errors no: test_cuda_errors-style
  # deliberate API failures are the test's own business
  for spec in ${FLASHC_SAN_JOBS:-memcheck:test_*d128 memcheck:test_modifiers racecheck:test_bf16_d128}; do
    tool=${spec%%:*} filter=${spec#*:}
    job "$tool-${filter//[^a-z0-9_]/}" OMP_NUM_THREADS=2 FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER="$filter" \
      compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 9 "$TEST"
  done
fi
for pid in "${pids[@]}"; do wait "$pid"; done
for name in "${names[@]}"; do
  rc=$(cat "$OUT/$name.rc" 2>/dev/null || echo "?")
  step "$name: rc $rc"
  grep -E "^\[ *(PASSED|FAILED|  FAILED|  ERROR) *\]|ERROR SUMMARY|RACECHECK SUMMARY|Hazard|error [0-9.e-]+ >|non-finite|not 0|failed" \
    "$OUT/$name.log" | head -12
  echo "$(grep -c ': dq .* dv ' "$OUT/$name.log") cases checked"
  [ "$rc" = 0 ] || { status=1; echo "$name FAILED (rc $rc)"; }
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
PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1 timeout "${FLASHC_BENCH_TIMEOUT:-300}" python3 bench/gpu/bench_bwd.py \
  --lib "$BUILD/libflashc.so" --out "$OUT/bwd.json" ${FLASHC_BWD_BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
