#!/usr/bin/env bash
# bench/gpu/s8_bwd6.sh BUILD_DIR — helper bwd6 (issue 12), budget 110 s on the H200 (hard
# timeouts: tests 45 s, bench the rest up to 108 s). Its first run (round B, 2026-12-03 ~22:25
# UTC, bench/RESULTS.md) made sm90v3w (src/cuda/attn_bwd_sm90v3.cu) the d 64 backward default
# in place of sm90v2s (one warpgroup, 64 keys, no producer warps), and removed sm90v3ws (one
# writer summing both warpgroups' dQ partials: 0.93-0.97x sm90v3w, racecheck hazards). A rerun
# checks that sm90v3w at d 64 (the d 128 default's design: TMA producer, two consumer
# warpgroups of 64 keys each, BN = 128, dQ by keys, each warpgroup's partial 64 x 64 tile added
# by its writer warp; deterministic mode: warpgroup 1's writer after warpgroup 0's) stays it:
#  1. in parallel, (a) compute-sanitizer racecheck and synccheck of sm90v3w, fp16 and bf16 d 64
#     (short cases: FLASHC_TEST_SMALL=1: GQA, causal, both modes); (b) the forced-family tests
#     of test_cuda_attn_bwd (full cases): bf16 / fp16 d 64 suites (fast + deterministic, GQA,
#     Sq != Sk), modifiers (window, softcap, ALiBi; every dim, d 64 on the family), the
#     deterministic bitwise test (d 128 and 64), strided + stream + workspace;
#  2. bench/gpu/bench_bwd4.py, d 64 then d 128, S 1k / 2k / 4k / 16k (B*S = 16k, hidden 2048),
#     causal and not: the default (sm90v3w at both) and at d 64 sm90v2s forced, each fast +
#     deterministic, against SDPA flash (FA2) and cuDNN in the same process; then the decision
#     table (LAST), whose rule is:
#       sm90v3w stays the d 64 default on CC 9.0 if every test and sanitizer job of it passed,
#       it is >= 1.05x sm90v2s at every d 64 shape in fast mode, and its deterministic mode
#       >= 1.00x sm90v2s's at every d 64 shape.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. Logs in
# $OUT (default BUILD_DIR/out-bwd6). Replaces s6_bwd5.sh (last version in git at ca30269).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd6 "${1:-}"
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0

# ---- 1. sanitizers and tests (<= 45 s wall, all jobs at once) ----
if [ -x "$TEST" ]; then
  if command -v compute-sanitizer >/dev/null; then
    for s in f16_d64 bf16_d64; do
      for tool in racecheck synccheck; do
        FAM=sm90v3w job "${tool:0:1}c-v3w-$s" 44 env FLASHC_TEST_SMALL=1 \
          FLASHC_TEST_FILTER="test_$s" \
          compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 "$TEST"
      done
    done
  else
    echo "s8_bwd6: no compute-sanitizer on PATH: racecheck / synccheck not run"
  fi
  for s in bf16_d64 f16_d64; do
    FAM=sm90v3w job "v3w-$s" 44 env FLASHC_TEST_FILTER="test_$s" "$TEST"
  done
  FAM=sm90v3w job v3w-mods 44 env FLASHC_TEST_FILTER=test_modifiers "$TEST"
  FAM=sm90v3w job v3w-det 44 env FLASHC_TEST_FILTER=test_deterministic_bitwise "$TEST"
  FAM=sm90v3w job v3w-strided 44 env FLASHC_TEST_FILTER=test_strided_stream_workspace "$TEST"
else
  echo "s8_bwd6: no $TEST (build with tests on): tests not run"
fi
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s8_bwd6: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of the 110 s) ----
left=$((108 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" --out "$OUT/bwd6.json" \
  --dims 64,128 --seqlens 1024,2048,4096,16384 --budget-ms 60 \
  --configs flashc,flashc_det,flashc_v2s,flashc_v2s_det \
  --configs-d128 flashc,flashc_det >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s8_bwd6: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90v3w; rc-*: racecheck, sc-*: synccheck, short cases)"
echo "$summary"
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
  sed -n '/^bwd alone/,$p' "$OUT/bench.log"
else
  echo "s8_bwd6: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi

# ---- 3. the decision table (from the bench's JSON and the jobs' exit codes) ----
python3 bench/gpu/bwd_decide.py "$OUT/bwd6.json" "$OUT"
echo "s8_bwd6: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
