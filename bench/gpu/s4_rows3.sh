#!/usr/bin/env bash
# bench/gpu/s4_rows3.sh BUILD_DIR — issue 14's RMSNorm gaps (bf16 16384 x 4096: forward >= 3.9
# TB/s and >= 1.2x F.rms_norm, backward >= 3.4 TB/s): the opt-in kernels of src/cuda/rows_v4.cu
# (v4 registers, v5 bulk copies; FLASHC_CUDA_RMS_FWD / FLASHC_CUDA_RMS_BWD), at most 60 s:
#   (a) tests/test_cuda_rows forced onto them (FLASHC_TEST_RMS_VARIANTS: every RMSNorm case,
#       the first pair on every shape), f32 / bf16 / f16, odd widths and strides, extremes;
#   (b) compute-sanitizer memcheck on short cases of two variant pairs (FLASHC_TEST_RMS_SHORT);
#   (c) bench/gpu/bench_rows3.py: v2 and the variants (forward, forward + residual, backward)
#       against F.rms_norm, eager x + r then F.rms_norm, autograd, a same-run torch clone and
#       copies written with the kernels' own access patterns (bench/gpu/rows_copy.cu, built
#       here with nvcc while (a) and (b) run), 16384 x 4096 and 4096 x 8192.
# (a), (b) and the nvcc build run side by side (correctness only), the bench alone after them.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_rows); no rebuild. Logs and JSON
# in $OUT (default BUILD_DIR/out-rows3); the table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(realpath "${1:?usage: s4_rows3.sh BUILD_DIR}")
[ -f "$B/libflashc.so" ] || { echo "s4_rows3: $B/libflashc.so not found"; exit 2; }
OUT=${OUT:-$B/out-rows3}
mkdir -p "$OUT"
t0=$SECONDS
( timeout 24 nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -Isrc/cuda -Isrc/core -Iinclude -I"$B/include" \
    -gencode=arch=compute_90a,code=sm_90a -o "$OUT/librows_copy.so" bench/gpu/rows_copy.cu ) >"$OUT/copylib.log" 2>&1 &
cpid=$!
V="v4:0,2,0,0|v5:4,3,0,1;v4:1,2,0,9,7|v5:4,2,0,0,5;v5:4,3,0,1|v4:4,0,1,7;v4:2,1,0,4,5|v5:1,4,2,1,7;v5:2,6,0,9,5|v4:2,0,9,5"
FLASHC_TEST_RMS_VARIANTS="$V" timeout 25 "$B/tests/test_cuda_rows" >"$OUT/test.log" 2>&1 &
tpid=$!
mpid=
if command -v compute-sanitizer >/dev/null; then
  FLASHC_TEST_RMS_SHORT=1 FLASHC_TEST_RMS_VARIANTS="v4:1,2,0,9,7|v5:4,3,0,1,5;v5:4,3,0,1,3|v4:4,0,1,3" \
    timeout 25 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    "$B/tests/test_cuda_rows" >"$OUT/memcheck.log" 2>&1 &
  mpid=$!
fi
wait $tpid; rt=$?
rm=skipped
[ -n "$mpid" ] && { wait "$mpid"; rm=$?; }
wait $cpid; rc=$?
echo "s4_rows3: tests rc $rt ($(grep -cE '^\[       OK' "$OUT/test.log") ok, $(grep -E 'PASSED|FAILED' "$OUT/test.log" | tail -1)); memcheck rc $rm ($(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" 2>/dev/null | tail -1)); copy lib rc $rc; $((SECONDS - t0)) s"
[ "$rt" -ne 0 ] && grep -E 'FAIL|fail|error|rc|variant' "$OUT/test.log" | tail -12
[ "$rm" != 0 ] && [ "$rm" != skipped ] && grep -E 'ERROR|Invalid|at 0x|FAIL' "$OUT/memcheck.log" | head -12
[ "$rc" -ne 0 ] && tail -5 "$OUT/copylib.log"
cl=()
[ -f "$OUT/librows_copy.so" ] && cl=(--copylib "$OUT/librows_copy.so")
left=$((58 - (SECONDS - t0)))
[ $left -lt 12 ] && left=12
FLASHC_LIBRARY="$B/libflashc.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_rows3.py ${cl[@]+"${cl[@]}"} --budget $((left - 9)) \
  --out "$OUT/rows3.json" >"$OUT/bench.log" 2>&1
rb=$?
[ $rb -ne 0 ] && { echo "s4_rows3: bench rc $rb"; grep -v '^|' "$OUT/bench.log" | tail -15; }
grep FAILED "$OUT/bench.log" | grep -v '^|' | head -10
sed -n '/^RMSNorm bf16/,$p' "$OUT/bench.log"
[ $rt -eq 0 ] && [ $rb -eq 0 ] && { [ "$rm" = 0 ] || [ "$rm" = skipped ]; }
