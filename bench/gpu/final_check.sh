#!/usr/bin/env bash
# bench/gpu/final_check.sh — one device call over merged main, for the session's closing check:
#   build (Release, CUDA sm_80 + sm_90a), the four GPU suites (forward on the default dispatch,
#   backward, row ops, serving: KV cache / varlen / split-KV), compute-sanitizer memcheck on the short forward cases, the whole CPU
#   ctest suite on the host (AVX-512 and AMX paths), and the Python tests with torch CPU + CUDA.
# FLASHC_DEPS: a folder made by bench/gpu/stage.sh (cmocka); FLASHC_WHEELS: pytest wheels.
# At most 6 files under $OUT (the device tool returns 8); a summary table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
export PKG_CONFIG_PATH="${FLASHC_DEPS:-/nonexistent}/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="${FLASHC_DEPS:-/nonexistent}/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
B=build-final
summary=()
status=0
note() { summary+=("$1"); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader >"$OUT/gpu.log" 2>&1
t0=$SECONDS
{ cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release && cmake --build $B -j "$(nproc)"; } >"$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
note "build $((SECONDS - t0)) s"
gpu() { # name, timeout, command...
  local name=$1 lim=$2; shift 2
  local t=$SECONDS
  echo "=== $name" >>"$OUT/gpu.log"
  timeout "$lim" "$@" >>"$OUT/gpu.log" 2>&1
  local rc=$?
  [ $rc = 0 ] || status=1
  note "$name: rc $rc, $((SECONDS - t)) s, $(grep -E 'PASSED|FAILED|ERROR SUMMARY' "$OUT/gpu.log" | tail -1)"
}
gpu test_cuda_attn 150 $B/tests/test_cuda_attn
gpu test_cuda_attn_bwd 120 $B/tests/test_cuda_attn_bwd
gpu test_cuda_rows 60 $B/tests/test_cuda_rows
gpu test_cuda_serving 90 $B/tests/test_cuda_serving
if command -v compute-sanitizer >/dev/null; then
  FLASHC_TEST_SMALL=1 FLASHC_TEST_DIMS=59,128 gpu memcheck_fwd 70 compute-sanitizer --tool memcheck \
    --error-exitcode 9 $B/tests/test_cuda_attn
fi
t=$SECONDS
grep -o -E 'avx512[a-z0-9_]*|amx_[a-z0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ' >"$OUT/ctest.log"
echo >>"$OUT/ctest.log"
exclude='^test_cuda'
ldconfig -p | grep -q libopenblas.so.0 || exclude="$exclude|^cli_bench_ceiling$"
timeout 200 ctest --test-dir $B --output-on-failure -j "$(nproc)" -E "$exclude" >>"$OUT/ctest.log" 2>&1 || status=1
note "ctest (CPU, host ISAs): $((SECONDS - t)) s, $(grep -E 'tests passed' "$OUT/ctest.log" | tail -1)"
note "  skipped: $(grep -c '(Skipped)' "$OUT/ctest.log"), isa runs: $(grep -oE '\.(amx|avx512bf16|avx512)  *\.\.\.*  *Passed' "$OUT/ctest.log" | wc -l) amx/avx512 passes"
t=$SECONDS
if ! python3 -c "import pytest" 2>/dev/null && [ -n "${FLASHC_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --find-links "$FLASHC_WHEELS" --target "$PWD/.pytest-lib" pytest >/dev/null 2>&1
  export PYTHONPATH="$PWD/.pytest-lib${PYTHONPATH:+:$PYTHONPATH}"
fi
FLASHC_LIBRARY="$PWD/$B/libflashc.so" PYTHONUNBUFFERED=1 timeout $((520 - SECONDS > 30 ? 520 - SECONDS : 30)) \
  python3 -m pytest python/tests -q -rs -p no:cacheprovider >"$OUT/pytest.log" 2>&1 || status=1
note "pytest (torch CPU + CUDA): $((SECONDS - t)) s, $(tail -1 "$OUT/pytest.log")"
echo
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
exit $status
