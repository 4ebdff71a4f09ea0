#!/usr/bin/env bash
# bench/gpu/s4_rows3.sh BUILD_DIR — issue 14's RMSNorm gaps (bf16 16384 x 4096: forward >= 3.9
# TB/s and >= 1.2x F.rms_norm, backward >= 3.4 TB/s): the kernels of src/cuda/rows_v4.cu (v4
# registers, v5 bulk copies; FLASHC_CUDA_RMS_FWD / FLASHC_CUDA_RMS_BWD), at most 45 s:
#   (a) tests/test_cuda_rows, four processes side by side, each on its own variant pairs
#       (FLASHC_TEST_RMS_VARIANTS; a process's first pair runs every shape): the defaults (the
#       residual forward is v4 now), then the round-2 variants; f32 / bf16 / f16, odd widths
#       and strides, extremes;
#   (b) compute-sanitizer memcheck on short cases (FLASHC_TEST_RMS_SHORT) of the default and
#       one variant pair, beside (a);
#   (c) bench/gpu/bench_rows3.py alone after them: v2 and the variants (forward, forward +
#       residual, backward) against F.rms_norm, eager x + r then F.rms_norm, autograd, a
#       same-run torch clone and copies in the kernels' own access patterns
#       (bench/gpu/rows_copy.cu, built here with nvcc during (a)), 16384 x 4096 and 4096 x 8192.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_rows); no rebuild. Logs in $OUT
# (default BUILD_DIR/out-rows3); a compact summary, then the table, on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=$(realpath "${1:?usage: s4_rows3.sh BUILD_DIR}")
[ -f "$B/libflashc.so" ] || { echo "s4_rows3: $B/libflashc.so not found"; exit 2; }
OUT=${OUT:-$B/out-rows3}
mkdir -p "$OUT"
t0=$SECONDS
( timeout 24 nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -Isrc/cuda -Isrc/core -Iinclude -I"$B/include" \
    -gencode=arch=compute_90a,code=sm_90a -o "$OUT/librows_copy.so" bench/gpu/rows_copy.cu ) >"$OUT/copylib.log" 2>&1 &
cpid=$!
VT=("-|-" "v4:0,2,0,1,0,4|v4:1,0,0" "v6:2,1|v5:1,3,0,1,5;v4:0,2,0,9,0,2|-" "v6:2,0,2|v4:1,0,1,7;v4:0,2,0,1|v4:2,0,0,5")
SB=()
command -v stdbuf >/dev/null && SB=(stdbuf -oL -eL) # the log up to a timeout, not a lost buffer
tp=()
for i in 0 1 2 3; do
  FLASHC_TEST_RMS_VARIANTS="${VT[$i]}" OMP_NUM_THREADS=2 timeout 28 ${SB[@]+"${SB[@]}"} "$B/tests/test_cuda_rows" \
    >"$OUT/test$i.log" 2>&1 &
  tp+=($!)
done
mpid=
if command -v compute-sanitizer >/dev/null; then
  FLASHC_TEST_RMS_SHORT=1 FLASHC_TEST_RMS_VARIANTS="-|-;v4:0,2,0,1,0,4|v4:1,0,1,3;v6:2,1|-" \
    timeout 28 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    "$B/tests/test_cuda_rows" >"$OUT/memcheck.log" 2>&1 &
  mpid=$!
fi
ok=0
for i in 0 1 2 3; do
  wait "${tp[$i]}"; r=$?
  [ $r -ne 0 ] && ok=1
  echo "s4_rows3: tests[$i] \"${VT[$i]}\": rc $r, $(grep -cE '^\[       OK' "$OUT/test$i.log") ok, $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test$i.log" | tr '\n' ' ')"
  [ $r -ne 0 ] && grep -E 'FAIL|rror|want|variant' "$OUT/test$i.log" | tail -6
done
rm=skipped
if [ -n "$mpid" ]; then
  wait "$mpid"; rm=$?
  echo "s4_rows3: memcheck rc $rm, $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1), $(grep -cE '^\[       OK' "$OUT/memcheck.log") ok"
  [ "$rm" != 0 ] && grep -E 'ERROR|Invalid|at 0x|FAIL' "$OUT/memcheck.log" | head -8
fi
wait $cpid; rc=$?
[ "$rc" -ne 0 ] && { echo "s4_rows3: copy library rc $rc"; tail -3 "$OUT/copylib.log"; }
cl=()
[ -f "$OUT/librows_copy.so" ] && cl=(--copylib "$OUT/librows_copy.so")
left=$((44 - (SECONDS - t0)))
[ $left -lt 10 ] && left=10
echo "s4_rows3: $((SECONDS - t0)) s before the bench, $left s for it"
FLASHC_LIBRARY="$B/libflashc.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_rows3.py ${cl[@]+"${cl[@]}"} --budget $((left - 8)) \
  --out "$OUT/rows3.json" >"$OUT/bench.log" 2>&1
rb=$?
[ $rb -ne 0 ] && { echo "s4_rows3: bench rc $rb"; grep -v '^|' "$OUT/bench.log" | tail -8; }
grep FAILED "$OUT/bench.log" | grep -v '^|' | head -6
sed -n '/^RMSNorm bf16/,$p' "$OUT/bench.log"
[ $ok -eq 0 ] && [ $rb -eq 0 ] && { [ "$rm" = 0 ] || [ "$rm" = skipped ]; }
