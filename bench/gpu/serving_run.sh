#!/usr/bin/env bash
# bench/gpu/serving_run.sh — issue 13's GPU check in one device call (the lent H200, ~4 min):
#   1. build (Release, sm_80 + sm_90a; FLASHC_DEPS = the cmocka folder of bench/gpu/stage.sh)
#   2. tests/test_cuda_serving (KV-cache decode / chunked prefill, paged, append, split-KV,
#      varlen, dense modifiers, graph capture, merge: fp64 reference, 2x rule)
#   3. bench/gpu/bench_decode.py (decode GB/s of K+V vs the copy ceiling, SDPA flash, cuDNN)
#   4. compute-sanitizer (FLASHC_SAN_TOOLS, default memcheck) on the short cases of step 2
#   5. python/tests/test_cuda_serving.py (the Python functions on CUDA tensors, no pytest needed)
#   6. tests/test_cuda_attn at head dim 128 (the prefill kernels after the refactor)
# Each step has its own timeout (seconds: FLASHC_T_TESTS, _SAN, _BENCH, _ATTN); a failing step
# does not stop the later ones. Logs to $OUT; the decode table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
status=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S), ${SECONDS}s)"; }
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
B=${FLASHC_BUILD:-build-gpu}
if [ -z "${FLASHC_BUILD:-}" ]; then
  step build
  { cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DFLASHC_INSTALL=OFF &&
    cmake --build $B -j "$(nproc)" --target flashc test_cuda_serving test_cuda_attn; } \
    >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
  grep -E "attn_decode" "$OUT/build.log" | grep -E "spill" | sort -u | head
fi

step test_cuda_serving
timeout "${FLASHC_T_TESTS:-55}" $B/tests/test_cuda_serving >"$OUT/test_cuda_serving.log" 2>&1 ||
  { status=1; echo "TEST_CUDA_SERVING FAILED"; }
grep -vE "^\[ +(RUN|OK) +\]|^    = one pass" "$OUT/test_cuda_serving.log" | grep -E \
  "PASSED|FAILED|rror|Failure|graph|merge|refusals|splits=64|long|varlen" | head -40
echo "$(grep -c ': o err' "$OUT/test_cuda_serving.log") results checked by the 2x rule," \
  "$(grep -c 'one pass within rounding' "$OUT/test_cuda_serving.log") split runs equal to one pass"

step "bench_decode.py"
PYTHONUNBUFFERED=1 timeout "${FLASHC_T_BENCH:-75}" python3 bench/gpu/bench_decode.py \
  --lib $B/libflashc.so --out "$OUT/decode.json" ${FLASHC_BENCH_ARGS:---graph} >"$OUT/bench.log" 2>&1 ||
  { status=1; echo "BENCH rc != 0"; }
grep -vE "^\|" "$OUT/bench.log" | tail -30

# FLASHC_SAN_TOOLS (default memcheck; e.g. "memcheck racecheck"): one log for all of them
for tool in ${FLASHC_SAN_TOOLS:-memcheck}; do
  step "compute-sanitizer $tool (short cases)"
  echo "=== $tool" >>"$OUT/sanitizer.log"
  FLASHC_TEST_SMALL=1 timeout "${FLASHC_T_SAN:-35}" compute-sanitizer --tool "$tool" \
    --error-exitcode 9 --report-api-errors no $B/tests/test_cuda_serving \
    >>"$OUT/sanitizer.log" 2>&1
  rc=$?; tail -3 "$OUT/sanitizer.log"
  [ $rc = 0 ] || { status=1; echo "SANITIZER $tool FAILED (rc $rc)"; }
done

step "Python: flash_attn_with_kvcache, flash_attn_varlen_func on CUDA"
FLASHC_LIBRARY="$PWD/$B/libflashc.so" timeout "${FLASHC_T_PY:-20}" python3 \
  python/tests/test_cuda_serving.py >"$OUT/python.log" 2>&1 || { status=1; echo "PYTHON FAILED"; }
tail -5 "$OUT/python.log"

step "test_cuda_attn (head dim 128)"
FLASHC_TEST_DIMS=128 timeout "${FLASHC_T_ATTN:-20}" $B/tests/test_cuda_attn \
  >"$OUT/test_cuda_attn.log" 2>&1 || { status=1; echo "TEST_CUDA_ATTN FAILED"; }
grep -E "PASSED|FAILED|Failure" "$OUT/test_cuda_attn.log" | head

echo; echo "=== decode table (${SECONDS}s)"
grep -E "^\|" "$OUT/bench.log"
exit $status
