#!/usr/bin/env bash
# bench/gpu/s20_trace.sh BUILD_DIR — issue 12, the first run of FLASHC_CUDA_BWD_TRACE (written on
# 2026-12-06 without device time; not yet run): why the Hopper backward's deterministic mode runs
# at 0.55-0.74x its fast mode above d 128 and 0.72-0.77x at d 64. Budget 150 s (hard timeouts: the test 60 s, the traces
# the rest up to 145 s; ~90 s expected).
#  1. test_bwd_trace (the traced twins bit-identical to the untraced kernels, the file's layout,
#     every recorded step's timestamps in order), and compute-sanitizer memcheck on it, side by
#     side;
#  2. bwd_trace.py run at d 256 (fast sm90h, det sm90h, det sm90hl), d 192 (fast sm90h2, det
#     sm90h2, det sm90h2l) and d 64 (fast and det sm90v3d, the defaults; det sm90v3u, the one
#     before), S 2k and 8k, causal and not (bf16, B*S = 16k, H = 2048 // d), then its report:
#     per trace the span, the SMs' busy share, the median step, the time split into phases
#     (d 192 / 256: warpgroup 0's prologue / data / compute / turn / dq / epilogue; d 64:
#     consumer 0's compute / staging wait / rest and writer 0's full wait / turn / issue), the
#     turn waits (first step of a block vs the rest) and the lag between successive turns on a
#     Q block, in steps.
# What it should settle (bench/RESULTS.md, "Session of 2026-12-06, morning"): whether the
# deterministic mode's loss is the turn wait (and then whether at a block's first step, a wave's
# start, or in the steady state), the dQ issue-to-release time, or SMs idle between blocks; the
# model to test says the late release (l) moves it from the dq phase to a one-step lag.
# BUILD_DIR: built with tests (targets flashc test_cuda_attn_bwd). $OUT: trace.log (the report),
# test.log, mem.log (and with S20_KEEP_BIN=1 the .bin traces in traces.tgz).
# First run: 2026-12-06 afternoon on an H100 (bench/RESULTS.md): the tests passed, the d 256
# traces came out, the call's time ran out during d 192 and the .bin archive was too large to
# return; hence S20_DIMS / S20_TESTS / S20_KEEP_BIN.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin trace "${1:-}" tests/test_cuda_attn_bwd
T0=$SECONDS
TEST=$B/tests/test_cuda_attn_bwd
# S20_TESTS=0 skips step 1; S20_DIMS (default "256 192 64") picks the head dims of step 2; the .bin
# traces are dropped (report only) unless S20_KEEP_BIN=1 (the first run's traces.tgz was over the
# device tool's file limit)
if [ "${S20_TESTS:-1}" != 0 ]; then
  ( timeout -k 2 60 env FLASHC_TEST_FILTER=test_bwd_trace $TEST > "$OUT/test.log" 2>&1; echo "rc $?" >> "$OUT/test.log" ) &
  ( timeout -k 2 60 env FLASHC_TEST_FILTER=test_bwd_trace FLASHC_TEST_SMALL=1 compute-sanitizer --tool memcheck \
      --error-exitcode 9 --report-api-errors no $TEST > "$OUT/mem.log" 2>&1; echo "rc $?" >> "$OUT/mem.log" ) &
  wait
  echo "test_bwd_trace: $(grep -E 'PASSED|FAILED' "$OUT/test.log" | tail -1) $(tail -1 "$OUT/test.log")"
  echo "memcheck: $(grep 'ERROR SUMMARY' "$OUT/mem.log" | tail -1) $(tail -1 "$OUT/mem.log")"
  grep -E '^  trace' "$OUT/test.log" | head -8
fi
mkdir -p "$OUT/tr"
dims=(${S20_DIMS:-256 192 64})
declare -A cfg=([256]=fast:sm90h,det:sm90h,det:sm90hl [192]=fast:sm90h2,det:sm90h2,det:sm90h2l
                [64]=fast:sm90v3d,det:sm90v3d,det:sm90v3u)
n=${#dims[@]}
for d in "${dims[@]}"; do
  left=$((145 - (SECONDS - T0)))
  env PYTHONUNBUFFERED=1 timeout -k 2 $((left / n)) python3 bench/gpu/bwd_trace.py run --lib "$LIB" \
    --out "$OUT/tr" --d "$d" --seqlens 2048,8192 --causal 0,1 --configs "${cfg[$d]}" >>"$OUT/trace.log" 2>&1
  n=$((n - 1))
done
if [ "${S20_KEEP_BIN:-0}" = 1 ]; then (cd "$OUT" && tar czf traces.tgz tr); fi
rm -rf "$OUT/tr"
grep -vE '^$' "$OUT/trace.log" | tail -60
echo "s20_trace: $((SECONDS - T0)) s"
