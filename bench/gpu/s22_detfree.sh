#!/usr/bin/env bash
# bench/gpu/s22_detfree.sh BUILD_DIR — issue 12, what deterministic mode costs at d 192 / 256 when
# nothing waits (written on 2026-12-06 afternoon; run the next session: bench/RESULTS.md, "Session of 2026-12-06, late morning", call A). The traces of that day (s20 /
# s21, bench/RESULTS.md) put ~1 us a step in the turn and more in the adds' completion before each
# release, and deterministic planes removed the non-causal wave-start wait but not that per-step
# cost; the question left: is the per-step cost the mode's instructions (the counter's acquire
# round trip, the per-panel completion, the fences and the release atomic) or waiting on the block
# before? FLASHC_CUDA_BWD_DET_FREE=1 keeps every instruction and makes every turn count as taken
# (correct gradients, not deterministic). free / fast near det / fast: the instructions are the
# cost (work on a cheaper completion / release); free / fast near 1: the waiting is (work on the
# order). Also the first GPU run of the default planes rule (2 planes without an upper key bound
# up to 8k): test_det_planes asserts it, and det against det_p1 times it.
# Budget 150 s (tests 50 s side by side; the bench up to 120 s; traces to 145 s).
#  1. test_det_free (2x rule under the variable; the d 64 default ignores it), test_det_planes,
#     memcheck on test_det_free's short cases;
#  2. bench_bwd4.py d 256 / 192, S 2k / 8k / 16k, causal and not: fast, det (the default rule),
#     det over one plane, free (one plane), free over 2 planes, SDPA FA2;
#  3. traces: d 256 8k and d 192 2k non-causal, det and free of the default families.
# $OUT: detfree.json, bench.log, trace.log, logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin detfree "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch detfree
F=FLASHC_TEST_FILTER
tjob f-free 50 - $F=test_det_free
tjob f-planes 50 - $F=test_det_planes
tjob f-memcheck 50 memcheck $F=test_det_free FLASHC_TEST_SMALL=1
tests_done s22_detfree
bwd_bench detfree 120 --dims 256,192 --seqlens 2048,8192,16384 --budget-ms 25 --peers flash \
  --configs flashc,flashc_det,flashc_det_p1,flashc_detfree,flashc_detfree_p2
grep -E 'WRONG|^device|Traceback' "$OUT/bench.log" | head -5
cp "$OUT/bench.log" "$FINAL/" 2>/dev/null
left=$((145 - (SECONDS - T0)))
if [ $left -gt 12 ]; then
  mkdir -p "$OUT/tr"
  {
    "${PY[@]}" timeout -k 2 $((left / 2)) python3 bench/gpu/bwd_trace.py run --lib "$LIB" \
      --out "$OUT/tr" --d 256 --seqlens 8192 --causal 0 --configs det:sm90h,free:sm90h
    left=$((145 - (SECONDS - T0)))
    "${PY[@]}" timeout -k 2 $left python3 bench/gpu/bwd_trace.py run --lib "$LIB" \
      --out "$OUT/tr" --d 192 --seqlens 2048 --causal 0 --configs det:sm90h2,free:sm90h2
  } >"$OUT/trace.log" 2>&1
  rm -rf "$OUT/tr"
  cp "$OUT/trace.log" "$FINAL/"
  grep -E '^\| (256|192)_' "$OUT/trace.log"; grep -E 'turn wait' "$OUT/trace.log" | cut -c1-200
fi
s_pack "$OUT/detfree.json" "$OUT/bench.log"
sed -n '/^bwd alone/,$p' "$OUT/bench.log" | head -20
exit $rc_all
