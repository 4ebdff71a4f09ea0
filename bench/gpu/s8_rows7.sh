#!/usr/bin/env bash
# bench/gpu/s8_rows7.sh BUILD_DIR — issue 14's four targets in ONE run (helper rows7), budget 90 s
# (hard timeouts inside; ~70 s expected): bf16 RMSNorm 16384 x 4096 forward >= 3.9 TB/s and >= 1.2x
# F.rms_norm, its backward >= 3.4 TB/s, SwiGLU (16384 x 2 x 4096) >= 90% of copy, RoPE (q (1, 16384,
# 32, 128), k (1, 16384, 8, 128) in place, cos/sin (16384, 64) float32: a Llama-3-8B layer) >= 85%.
#   (a) tests/test_cuda_rows, three processes side by side: the RMSNorm defaults (and v2, whose
#       residual forward is rms_fwd_vec) with RoPE on every FLASHC_CUDA_ROPE knob value (v2: U
#       1/2/4, hints 0/1/2, PDL; v3, helper rows8: M 2/5/8, hints, PDL); the RoPE settings the
#       bench times; FLASHC_CUDA_ROWS=v1 (rms_fwd_vec,
#       rms_bwd_vec and rope_kernel: store_chunk, now one st.global.v4 a chunk); compute-sanitizer
#       memcheck on the short cases beside them;
#   (b) `flashc bench --device cuda --calls 50 --reps 7` (the project's tool, perf mode: 50
#       back-to-back calls between one pair of events, every row and a cudaMemcpy of each op's
#       bytes once a round, in turn, median of 7 rounds): RMSNorm fwd / residual / bwd, SwiGLU
#       fwd / bwd, RoPE NeoX and GPT-J (the default), copies;
#   (c) bench/gpu/bench_rows_targets.py: the same timing in one Python process, with F.rms_norm,
#       autograd and torch SwiGLU as the peers, torch copies of the same bytes, and RoPE's default
#       against its knob settings (interleaved), then the closing table of the four targets;
#   (d) the C bench again for RoPE alone under the best RoPE setting of (c) (FLASHC_CUDA_ROPE),
#       so that the project's tool shows it too.
# BUILD_DIR: a full build (libflashc.so, flashc, tests/test_cuda_rows); no rebuild. Logs in $OUT
# (default BUILD_DIR/out-rows7). The table to read is the LAST block of the output.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin rows7 "${1:-}" flashc tests/test_cuda_rows
t0=$SECONDS
SB=()
command -v stdbuf >/dev/null && SB=(stdbuf -oL -eL) # the log up to a timeout, not a lost buffer
# the RoPE settings bench_rows_targets.py times (its ROPE list); test process 1 covers those that
# test_cuda_rows's own list (process 0) leaves out
TIMED_ROPE="-;v2:4,2,1;v3;v3:2,0,0;v3:4,0,0;v3:8,0,0;v3:5,2,0;v3:5,0,1"
TV=("-|-;v2|v2" "-|-" "-|-")
TR=("" "v2:4,2,1;v3:2,0,0;v3:4,0,0;v3:8,0,0;v3:5,2,0;v3:5,0,1" "-")
TE=("" "" "v1")
tp=()
for i in 0 1 2; do
  env ${TR[$i]:+FLASHC_TEST_ROPE_VARIANTS="${TR[$i]}"} ${TE[$i]:+FLASHC_CUDA_ROWS="${TE[$i]}"} \
    FLASHC_TEST_RMS_VARIANTS="${TV[$i]}" OMP_NUM_THREADS=2 timeout 28 ${SB[@]+"${SB[@]}"} "$B/tests/test_cuda_rows" \
    >"$OUT/test$i.log" 2>&1 &
  tp+=($!)
done
mpid=
if command -v compute-sanitizer >/dev/null; then
  FLASHC_TEST_SMALL=1 FLASHC_TEST_RMS_SHORT=1 FLASHC_TEST_RMS_VARIANTS="-|-" \
    FLASHC_TEST_ROPE_VARIANTS="v3;v3:8,2,1;v3:2,1,0" \
    timeout 28 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    "$B/tests/test_cuda_rows" >"$OUT/memcheck.log" 2>&1 &
  mpid=$!
fi
ok=0
for i in 0 1 2; do
  wait "${tp[$i]}"; r=$?
  [ $r -ne 0 ] && ok=1
  echo "s8_rows7: tests[$i] rms \"${TV[$i]}\" rope \"${TR[$i]:-(its list)}\"${TE[$i]:+ FLASHC_CUDA_ROWS=${TE[$i]}}: rc $r, $(grep -cE '^\[       OK' "$OUT/test$i.log") ok, $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test$i.log" | tr '\n' ' ')"
  [ $r -ne 0 ] && grep -E 'FAIL|rror|variant|above' "$OUT/test$i.log" | tail -8
done
rm=skipped
if [ -n "$mpid" ]; then
  wait "$mpid"; rm=$?
  echo "s8_rows7: memcheck rc $rm, $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1), $(grep -cE '^\[       OK' "$OUT/memcheck.log") ok"
  [ "$rm" != 0 ] && grep -E 'ERROR|Invalid|at 0x|FAIL' "$OUT/memcheck.log" | head -8
fi
echo "s8_rows7: $((SECONDS - t0)) s before the benches"

# (b) the C bench, perf mode
OPS=rmsnorm,rmsnorm_bwd,swiglu,swiglu_bwd,rope,copy
timeout -k 2 22 "$B/flashc" bench --device cuda --op $OPS --calls 50 --reps 7 --seed 1 --format json \
  >"$OUT/cbench.json" 2>"$OUT/cbench.log"
rc_c=$?
echo "s8_rows7: flashc bench --device cuda --op $OPS --calls 50 --reps 7: rc $rc_c"
grep -E '^  |FAILED|max_err' "$OUT/cbench.log" | cut -c1-160
grep -oE '"of the [^"]*"' "$OUT/cbench.json"

# (c) the Python targets bench
left=$((84 - (SECONDS - t0)))
[ $left -lt 20 ] && left=20
FLASHC_LIBRARY="$B/libflashc.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_rows_targets.py --calls 50 --reps 7 --rope="$TIMED_ROPE" \
  --cjson "$OUT/cbench.json" --out "$OUT/targets.json" >"$OUT/targets.log" 2>&1
rb=$?
[ $rb -ne 0 ] && { echo "s8_rows7: bench_rows_targets.py rc $rb"; grep -v '^|' "$OUT/targets.log" | tail -8; }

# (d) the C bench for RoPE under the best setting of (c), when it is not the default
best=$(python3 -c "
import json
r = json.load(open('$OUT/targets.json'))['rows']
b = max((k for k in r if k.startswith('rope_neox_')), key=lambda k: r[k]['tbps'])
print(b.split('_', 2)[2])" 2>/dev/null)
if [ -n "$best" ] && [ "$best" != default ] && [ $((SECONDS - t0)) -lt 80 ]; then
  FLASHC_CUDA_ROPE="$best" timeout -k 2 $((88 - (SECONDS - t0))) "$B/flashc" bench --device cuda --op rope,copy \
    --calls 50 --reps 7 --seed 1 --format json >"$OUT/cbench_rope.json" 2>"$OUT/cbench_rope.log"
  echo "s8_rows7: FLASHC_CUDA_ROPE=$best flashc bench --device cuda --op rope,copy --calls 50 --reps 7: rc $?"
  grep -E '^  ' "$OUT/cbench_rope.log" | grep rope | cut -c1-160
  grep -oE '"of the copy of the same[^"]*"' "$OUT/cbench_rope.json"
fi
echo "s8_rows7: $((SECONDS - t0)) s in all"
echo
sed -n '/^rows7 targets bench/,$p' "$OUT/targets.log"
[ $ok -eq 0 ] && [ $rc_c -eq 0 ] && [ $rb -eq 0 ] && { [ "$rm" = 0 ] || [ "$rm" = skipped ]; }
