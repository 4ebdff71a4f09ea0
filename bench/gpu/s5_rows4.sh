#!/usr/bin/env bash
# bench/gpu/s5_rows4.sh BUILD_DIR — issue 14's open RMSNorm targets (bf16 16384 x 4096: forward
# >= 3.9 TB/s and >= 1.2x F.rms_norm, backward >= 3.4 TB/s), helper rows4, round 2: the new
# defaults (plain forward rms_fwd_v4 with R = 4 and PDL for rows of >= 512 chunks, residual v4
# with PDL; src/cuda/rows_v4.cu fwd_t), the old kernels by name (FLASHC_CUDA_RMS_FWD=v2), the
# v4 knobs around them (v4:P,W,B,H,G,R,L) and the backward with PDL (FLASHC_CUDA_RMS_BWD=v2:1,
# v4:N,B,H,G,L), at most 90 s:
#   (a) tests/test_cuda_rows, four processes side by side, each on its own forced variant pairs
#       (FLASHC_TEST_RMS_VARIANTS; a process's first pair runs every shape): the defaults, the
#       old kernels with v2:1, the knobs; f32 / bf16 / f16, odd widths and strides, extremes;
#   (b) compute-sanitizer memcheck on short cases (FLASHC_TEST_RMS_SHORT), beside (a);
#   (c) bench/gpu/bench_rows4.py alone after them, on round 2's lists (--fwd / --res / --bwd; the
#       script's own lists are a later round's): the variants against F.rms_norm / eager
#       x + r / autograd in the same process, the copy ceilings (torch clone, torch.add for the
#       backward's traffic, bench/gpu/rows_copy.cu built here with nvcc during (a)) and a
#       per-kernel breakdown (torch.profiler), 16384 x 4096 and 4096 x 8192.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_rows); no rebuild. Logs in $OUT
# (default BUILD_DIR/out-rows4); a compact summary, then the table, LAST on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=$(realpath "${1:?usage: s5_rows4.sh BUILD_DIR}")
[ -f "$B/libflashc.so" ] || { echo "s5_rows4: $B/libflashc.so not found"; exit 2; }
OUT=${OUT:-$B/out-rows4}
mkdir -p "$OUT"
t0=$SECONDS
( timeout 30 nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -Isrc/cuda -Isrc/core -Iinclude -I"$B/include" \
    -gencode=arch=compute_90a,code=sm_90a -o "$OUT/librows_copy.so" bench/gpu/rows_copy.cu ) >"$OUT/copylib.log" 2>&1 &
cpid=$!
VT=("-|-"
    "v2|v2:1;v4:0,2,0,1,0,4,1|v4:2,0,0,0,1"
    "v4:0,2,0,0,0,2,1|v2:1;v4:0,2,0,0,0,4|v4:4,0,0,3,1;v4:0,2,0,9,0,4,1|-"
    "v4:0,2,0,1,0,2,1|v4:2,0,1,0,1;v4:2,2,0,0,7,4|v2:1;v4:0,2,0,0,0,8,1|-")
SB=()
command -v stdbuf >/dev/null && SB=(stdbuf -oL -eL) # the log up to a timeout, not a lost buffer
tp=()
for i in 0 1 2 3; do
  FLASHC_TEST_RMS_VARIANTS="${VT[$i]}" OMP_NUM_THREADS=2 timeout 30 ${SB[@]+"${SB[@]}"} "$B/tests/test_cuda_rows" \
    >"$OUT/test$i.log" 2>&1 &
  tp+=($!)
done
mpid=
if command -v compute-sanitizer >/dev/null; then
  FLASHC_TEST_RMS_SHORT=1 FLASHC_TEST_RMS_VARIANTS="-|-;-|v2:1;v4:0,2,0,1,0,4,1|v4:2,0,0,3,1;v4:0,2,0,0,0,2,1|-" \
    timeout 30 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    "$B/tests/test_cuda_rows" >"$OUT/memcheck.log" 2>&1 &
  mpid=$!
fi
ok=0
for i in 0 1 2 3; do
  wait "${tp[$i]}"; r=$?
  [ $r -ne 0 ] && ok=1
  echo "s5_rows4: tests[$i] \"${VT[$i]}\": rc $r, $(grep -cE '^\[       OK' "$OUT/test$i.log") ok, $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test$i.log" | tr '\n' ' ')"
  [ $r -ne 0 ] && grep -E 'FAIL|rror|want|variant' "$OUT/test$i.log" | tail -6
done
rm=skipped
if [ -n "$mpid" ]; then
  wait "$mpid"; rm=$?
  echo "s5_rows4: memcheck rc $rm, $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1), $(grep -cE '^\[       OK' "$OUT/memcheck.log") ok"
  [ "$rm" != 0 ] && grep -E 'ERROR|Invalid|at 0x|FAIL' "$OUT/memcheck.log" | head -8
fi
wait $cpid; rc=$?
[ "$rc" -ne 0 ] && { echo "s5_rows4: copy library rc $rc"; tail -3 "$OUT/copylib.log"; }
cl=()
[ -f "$OUT/librows_copy.so" ] && cl=(--copylib "$OUT/librows_copy.so")
left=$((84 - (SECONDS - t0)))
[ $left -lt 15 ] && left=15
echo "s5_rows4: $((SECONDS - t0)) s before the bench, $left s for it"
FLASHC_LIBRARY="$B/libflashc.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_rows4.py ${cl[@]+"${cl[@]}"} --budget $((left - 10)) \
  --fwd="-;v2;v4:0,2,0,0,0,4;v4:0,2,0,1,0,4,1;v4:0,2,0,0,0,2,1;v4:0,2,0,1,0,2,1;v4:0,2,0,9,0,4,1;v4:0,2,0,0,0,8,1" \
  --res="-;v2;v4:0,2,0,0;v4:0,2,0,1,0,1,1;v4:0,2,0,9,0,1,1" --bwd="-;v2:1;v4:2,0,0,0,1;v4:4,0,0,0,1;v4:2,0,1,0,1" \
  --out "$OUT/rows4.json" >"$OUT/bench.log" 2>&1
rb=$?
[ $rb -ne 0 ] && { echo "s5_rows4: bench rc $rb"; grep -v '^|' "$OUT/bench.log" | tail -8; }
grep -E "FAILED|prof .*:" "$OUT/bench.log" | grep -v '^|' | head -6
sed -n '/^kernel breakdown/,/^$/p' "$OUT/bench.log"
sed -n '/^RMSNorm bf16/,$p' "$OUT/bench.log"
[ $ok -eq 0 ] && [ $rb -eq 0 ] && { [ "$rm" = 0 ] || [ "$rm" = skipped ]; }
