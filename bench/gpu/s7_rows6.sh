#!/usr/bin/env bash
# bench/gpu/s7_rows6.sh BUILD_DIR — issue 14's RMSNorm FORWARD (bf16 16384 x 4096 >= 3.9 TB/s and
# >= 1.2x F.rms_norm), helper rows6: rms_fwd_v4's store mode 4 (a plain st.global, knob H = 16..19
# of FLASHC_CUDA_RMS_FWD=v4:P,W,B,H,G,R,L; src/cuda/rows_v4.cu; opt-in) and a blocks-a-SM cap,
# against the default (v4 R = 4 + PDL, ld.global.cs / st.global.cs), budget 40 s:
#   (a) tests/test_cuda_rows, three processes side by side, each on forced forward variants
#       (FLASHC_TEST_RMS_VARIANTS; the first pair of a process runs every shape, plain and
#       residual, f32 / bf16 / f16, odd widths and strides, the extremes);
#   (b) compute-sanitizer memcheck on the short cases (FLASHC_TEST_RMS_SHORT) of two of them,
#       beside (a); bench/gpu/rows_copy.cu built with nvcc beside (a) (the copy ceilings);
#   (c) bench/gpu/bench_rows4.py alone after them: the forward variants below against
#       F.rms_norm, torch clone and the flat copy with PDL; the residual default once; the
#       backward default (v6, H on: plain dx stores, now one st.global.v4 a chunk, st_plain) and
#       v6:1,1,1,1,0 (H off) beside it; bf16 16384 x 4096 and 4096 x 8192; the table LAST.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_rows); no rebuild. Logs in $OUT
# (default BUILD_DIR/out-rows6).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin rows6 "${1:-}"
t0=$SECONDS
# H = load mode + 4 x store mode: 19 ld.global.nc + plain st; 17 evict-first loads + plain st;
# 16 ld.global.cs + plain st; 11 ld.global.nc + st evict-normal policy (the flat copy's hints);
# B = 6: at most 6 blocks a SM (9 by registers at R = 4); R = 8 (two chunks a lane) with H = 19.
NEW=("v4:0,2,0,19,0,4,1" "v4:0,2,0,17,0,4,1" "v4:0,2,0,16,0,4,1" "v4:0,2,0,11,0,4,1"
     "v4:0,2,6,19,0,4,1" "v4:0,2,0,19,0,8,1")
( timeout 15 nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -Isrc/cuda -Isrc/core -Iinclude -I"$B/include" \
    -gencode=arch=compute_90a,code=sm_90a -o "$OUT/librows_copy.so" bench/gpu/rows_copy.cu ) >"$OUT/copylib.log" 2>&1 &
cpid=$!
VT=("${NEW[0]}|-;${NEW[5]}|-"
    "${NEW[1]}|-;${NEW[4]}|-"
    "${NEW[2]}|-;${NEW[3]}|-")
SB=()
command -v stdbuf >/dev/null && SB=(stdbuf -oL -eL) # the log up to a timeout, not a lost buffer
tp=()
for i in 0 1 2; do
  FLASHC_TEST_RMS_VARIANTS="${VT[$i]}" OMP_NUM_THREADS=2 timeout 18 ${SB[@]+"${SB[@]}"} "$B/tests/test_cuda_rows" \
    >"$OUT/test$i.log" 2>&1 &
  tp+=($!)
done
mpid=
if command -v compute-sanitizer >/dev/null; then
  FLASHC_TEST_RMS_SHORT=1 FLASHC_TEST_RMS_VARIANTS="${NEW[0]}|-;${NEW[1]}|-" \
    timeout 18 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    "$B/tests/test_cuda_rows" >"$OUT/memcheck.log" 2>&1 &
  mpid=$!
fi
ok=0
for i in 0 1 2; do
  wait "${tp[$i]}"; r=$?
  [ $r -ne 0 ] && ok=1
  echo "s7_rows6: tests[$i] \"${VT[$i]}\": rc $r, $(grep -cE '^\[       OK' "$OUT/test$i.log") ok, $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test$i.log" | tr '\n' ' ')"
  [ $r -ne 0 ] && grep -E 'FAIL|rror|want|variant' "$OUT/test$i.log" | tail -6
done
rm=skipped
if [ -n "$mpid" ]; then
  wait "$mpid"; rm=$?
  echo "s7_rows6: memcheck rc $rm, $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1), $(grep -cE '^\[       OK' "$OUT/memcheck.log") ok"
  [ "$rm" != 0 ] && grep -E 'ERROR|Invalid|at 0x|FAIL' "$OUT/memcheck.log" | head -8
fi
wait $cpid; rc=$?
[ "$rc" -ne 0 ] && { echo "s7_rows6: copy library rc $rc (copies skipped)"; tail -3 "$OUT/copylib.log"; }
cl=()
[ "$rc" -eq 0 ] && [ -f "$OUT/librows_copy.so" ] && cl=(--copylib "$OUT/librows_copy.so")
left=$((39 - (SECONDS - t0)))
[ $left -lt 18 ] && left=18
echo "s7_rows6: $((SECONDS - t0)) s before the bench, $left s for it"
fwd="-"
for v in "${NEW[@]}"; do fwd="$fwd;$v"; done
FLASHC_LIBRARY="$B/libflashc.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_rows4.py ${cl[@]+"${cl[@]}"} --budget $((left - 5)) \
  --fwd="$fwd" --res= --bwd="-;v6:1,1,1,1,0" --prof 0 --out "$OUT/rows6.json" >"$OUT/bench.log" 2>&1
rb=$?
[ $rb -ne 0 ] && { echo "s7_rows6: bench rc $rb"; grep -v '^|' "$OUT/bench.log" | tail -8; }
grep -E "FAILED|NOT REPEATABLE" "$OUT/bench.log" | grep -v '^|' | head -6
sed -n '/^RMSNorm bf16/,$p' "$OUT/bench.log" | grep -vE '\| (rms\+res|copy3) '
[ $ok -eq 0 ] && [ $rb -eq 0 ] && { [ "$rm" = 0 ] || [ "$rm" = skipped ]; }
