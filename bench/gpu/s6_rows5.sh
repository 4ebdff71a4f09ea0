#!/usr/bin/env bash
# bench/gpu/s6_rows5.sh BUILD_DIR — issue 14's RMSNorm backward (bf16 16384 x 4096 >= 3.4 TB/s),
# helper rows5: FLASHC_CUDA_RMS_BWD=v6[:B,P,L,S,H] (src/cuda/rows.cu bwd6_env; opt-in) against
# the default v2 and v2:1 (v2 + PDL), budget 45 s:
#   (a) tests/test_cuda_rows, three processes side by side, each on forced variant pairs
#       (FLASHC_TEST_RMS_VARIANTS; a process's first pair runs every shape, f32 / bf16 / f16,
#       odd widths and strides, the extremes; dw twice bit for bit): v6; v6 with plain loads /
#       stores (H = 1); rms_dw_sum4 alone (v6:0,0,0,1,0), then the defaults;
#   (b) compute-sanitizer memcheck on the short cases (FLASHC_TEST_RMS_SHORT) of v6 and
#       v6:1,1,1,1,1, beside (a); bench/gpu/rows_copy.cu built with nvcc beside (a) (the copy
#       ceilings; skipped if not built in time);
#   (c) bench/gpu/bench_rows4.py alone after them (its own lists are this round's): backward v2,
#       v2:1, v6 and v6 with each knob off in turn and with H = 1, against autograd of
#       F.rms_norm; forward default / v2 and residual default against F.rms_norm / eager
#       x + r; torch clone, torch.add (the backward's 2 reads + 1 write), flat copies (PDL), the
#       R 4 row copy and x ^ dy copies in rms_bwd_reg's pattern (cs, plain, cs + a barrier); a torch.profiler breakdown (kernel times, span a call); bf16
#       16384 x 4096 and 4096 x 8192; the table LAST on stdout.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_rows); no rebuild. Logs in $OUT
# (default BUILD_DIR/out-rows5).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=$(realpath "${1:?usage: s6_rows5.sh BUILD_DIR}")
[ -f "$B/libflashc.so" ] || { echo "s6_rows5: $B/libflashc.so not found"; exit 2; }
OUT=${OUT:-$B/out-rows5}
mkdir -p "$OUT"
t0=$SECONDS
( timeout 20 nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -Isrc/cuda -Isrc/core -Iinclude -I"$B/include" \
    -gencode=arch=compute_90a,code=sm_90a -o "$OUT/librows_copy.so" bench/gpu/rows_copy.cu ) >"$OUT/copylib.log" 2>&1 &
cpid=$!
VT=("-|v6"
    "-|v6:1,1,1,1,1"
    "-|v6:0,0,0,1,0;-|-")
SB=()
command -v stdbuf >/dev/null && SB=(stdbuf -oL -eL) # the log up to a timeout, not a lost buffer
tp=()
for i in 0 1 2; do
  FLASHC_TEST_RMS_VARIANTS="${VT[$i]}" OMP_NUM_THREADS=2 timeout 22 ${SB[@]+"${SB[@]}"} "$B/tests/test_cuda_rows" \
    >"$OUT/test$i.log" 2>&1 &
  tp+=($!)
done
mpid=
if command -v compute-sanitizer >/dev/null; then
  FLASHC_TEST_RMS_SHORT=1 FLASHC_TEST_RMS_VARIANTS="-|v6;-|v6:1,1,1,1,1" \
    timeout 22 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    "$B/tests/test_cuda_rows" >"$OUT/memcheck.log" 2>&1 &
  mpid=$!
fi
ok=0
for i in 0 1 2; do
  wait "${tp[$i]}"; r=$?
  [ $r -ne 0 ] && ok=1
  echo "s6_rows5: tests[$i] \"${VT[$i]}\": rc $r, $(grep -cE '^\[       OK' "$OUT/test$i.log") ok, $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test$i.log" | tr '\n' ' ')"
  [ $r -ne 0 ] && grep -E 'FAIL|rror|want|variant' "$OUT/test$i.log" | tail -6
done
rm=skipped
if [ -n "$mpid" ]; then
  wait "$mpid"; rm=$?
  echo "s6_rows5: memcheck rc $rm, $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1), $(grep -cE '^\[       OK' "$OUT/memcheck.log") ok"
  [ "$rm" != 0 ] && grep -E 'ERROR|Invalid|at 0x|FAIL' "$OUT/memcheck.log" | head -8
fi
wait $cpid; rc=$?
[ "$rc" -ne 0 ] && { echo "s6_rows5: copy library rc $rc (copies skipped)"; tail -3 "$OUT/copylib.log"; }
cl=()
[ "$rc" -eq 0 ] && [ -f "$OUT/librows_copy.so" ] && cl=(--copylib "$OUT/librows_copy.so")
left=$((43 - (SECONDS - t0)))
[ $left -lt 15 ] && left=15
echo "s6_rows5: $((SECONDS - t0)) s before the bench, $left s for it"
FLASHC_LIBRARY="$B/libflashc.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_rows4.py ${cl[@]+"${cl[@]}"} --budget $((left - 6)) \
  --out "$OUT/rows5.json" >"$OUT/bench.log" 2>&1
rb=$?
[ $rb -ne 0 ] && { echo "s6_rows5: bench rc $rb"; grep -v '^|' "$OUT/bench.log" | tail -8; }
grep -E "FAILED|NOT REPEATABLE|prof .*:" "$OUT/bench.log" | grep -v '^|' | head -6
sed -n '/^kernel breakdown/,/^$/p' "$OUT/bench.log"
sed -n '/^RMSNorm bf16/,$p' "$OUT/bench.log"
[ $ok -eq 0 ] && [ $rb -eq 0 ] && { [ "$rm" = 0 ] || [ "$rm" = skipped ]; }
