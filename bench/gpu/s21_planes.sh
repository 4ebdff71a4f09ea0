#!/usr/bin/env bash
# bench/gpu/s21_planes.sh BUILD_DIR — issue 12, deterministic mode over P planes (written on
# 2026-12-06 afternoon; FLASHC_CUDA_BWD_DET_PLANES=P, attn_bwd.cu's det_planes, on the sm90h
# families: d 192 and 256). Why: the first trace run (s20_trace.sh, the same day, H100) showed the
# d 256 deterministic step at 7.0-7.8 us against fast mode's 4.95, its compute unchanged, the
# rest turn waits (~1 us a step in the steady state) and the adds' completion; the turns chain
# a Q block's dQ adds through every K block of its head (128 at 8k), so one slow block delays
# all after it. With P planes block n waits only for block n - P, P chains of 1 / P the length,
# each with its own float32 accumulator, summed in plane order by the postprocess.
# Budget 150 s (tests 60 s side by side; the bench the rest up to 120 s; traces up to 145 s).
#  1. test_det_planes (P = 2, 3 on sm90h d 256 / d 192, sm90h2, sm90hl, sm90h2l: the 2x rule,
#     3 runs bit for bit, dk / dv those of one plane, the workspace, P out of range), memcheck and
#     racecheck on its short cases; the default d 256 / d 192 suites and the deterministic
#     bitwise test under P = 2 / 3; test_sm90h2l_d192 (its padded rows refused since today).
#  2. bench_bwd4.py at d 192 and 256, S 2k / 8k / 16k, causal and not: fast, det (one plane), det
#     over 2 and 4 planes, SDPA FA2; the table (p2/det, p4/det, p2/fast, ...).
#  3. traces of d 256 S 8k non-causal: det, det2, det4 (the turn waits and lags per plane count).
# $OUT: planes.json, bench.log, trace.log, logs.tgz (every job's log and rc).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin planes "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch planes
F=FLASHC_TEST_FILTER P=FLASHC_CUDA_BWD_DET_PLANES

# ---- 1. tests, sanitizers (<= 60 s wall, all jobs at once) ----
tjob p-planes 60 - $F=test_det_planes
tjob p-h2l 60 - $F=test_sm90h2l_d192
tjob p2-bf16_d256 60 - $F=test_bf16_d256 $P=2
tjob p3-f16_d192 60 - $F=test_f16_d192 $P=3
tjob p2-detbits 60 - $F=test_deterministic_bitwise $P=2
tjob p-memcheck 60 memcheck $F=test_det_planes FLASHC_TEST_SMALL=1
tjob p-racecheck 60 racecheck $F=test_det_planes FLASHC_TEST_SMALL=1
tests_done s21_planes

# ---- 2. bench (up to 120 s since the start) ----
bwd_bench planes 120 --dims 256,192 --seqlens 2048,8192,16384 --budget-ms 25 --peers flash \
  --configs flashc,flashc_det,flashc_det_p2,flashc_det_p4
grep -E 'WRONG|^device|Traceback' "$OUT/bench.log" | head -5
cp "$OUT/bench.log" "$FINAL/" 2>/dev/null

# ---- 3. traces (the rest of 145 s): report only, the .bin files stay behind ----
left=$((145 - (SECONDS - T0)))
if [ $left -gt 12 ]; then
  mkdir -p "$OUT/tr"
  "${PY[@]}" timeout -k 2 $left python3 bench/gpu/bwd_trace.py run --lib "$LIB" --out "$OUT/tr" \
    --d 256 --seqlens 8192 --causal 0 --configs det:sm90h,det2:sm90h,det4:sm90h >"$OUT/trace.log" 2>&1
  rm -rf "$OUT/tr"
  cp "$OUT/trace.log" "$FINAL/"
  grep -E '^\| 256' "$OUT/trace.log"; grep -E 'turn wait' "$OUT/trace.log" | cut -c1-200
fi
s_pack "$OUT/planes.json" "$OUT/bench.log"
# the table LAST
sed -n '/^bwd alone/,$p' "$OUT/bench.log" | head -20
exit $rc_all
