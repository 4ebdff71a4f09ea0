#!/usr/bin/env bash
# bench/gpu/s6_bwd5.sh BUILD_DIR — helper bwd5 (issue 12), budget 110 s on the H200 (hard
# timeouts: tests 45 s, bench the rest up to 108 s). Decides whether sm90v3w (or sm90v3q)
# becomes the d 128 backward default after the racecheck fix of 2026-12-03 (LSE, D by plain
# stores + per-lane arrivals instead of cp.async; sm90v3w's writers without the shared dQ-info
# handoff; bench/RESULTS.md "racecheck of the sm90v3 backward"):
#  1. in parallel, on short cases (FLASHC_TEST_SMALL=1, d 128 tests only):
#     compute-sanitizer racecheck of sm90v3w and sm90v3q, fp16 and bf16 (rc-*); synccheck of
#     sm90v3w (sc-*); and the forced-family tests of test_cuda_attn_bwd (full cases): sm90v3w
#     bf16/fp16 d 128 suites (fast + deterministic), modifiers, deterministic bitwise, strided;
#     sm90v3q bf16 d 128 and deterministic bitwise;
#  2. bench/gpu/bench_bwd4.py at d 128, S 2k / 4k / 16k (B*S = 16k, hidden 2048), causal and not:
#     sm90v3w, sm90v3q, sm90 (each fast + deterministic) against SDPA flash (FA2) and cuDNN in
#     the same process; the table is printed last.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. Logs in
# $OUT (default BUILD_DIR/out-bwd5).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd5 "${1:-}"
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0

# ---- 1. sanitizers and tests (<= 45 s wall, all jobs at once) ----
if [ -x "$TEST" ]; then
  if command -v compute-sanitizer >/dev/null; then
    for f in sm90v3w sm90v3q; do
      for s in f16_d128 bf16_d128; do
        FAM=$f job "rc-${f#sm90}-$s" 44 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER="test_$s" \
          compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 "$TEST"
      done
    done
    FAM=sm90v3w job sc-v3w-f16_d128 44 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_f16_d128 \
      compute-sanitizer --tool synccheck --report-api-errors no --error-exitcode 9 "$TEST"
  else
    echo "s6_bwd5: no compute-sanitizer on PATH: racecheck / synccheck not run"
  fi
  for s in bf16_d128 f16_d128; do # the heaviest host references: 3 threads each
    FAM=sm90v3w OMP_NUM_THREADS=3 job "v3w-$s" 44 env FLASHC_TEST_FILTER="test_$s" "$TEST"
  done
  FAM=sm90v3w job v3w-mods 44 env FLASHC_TEST_FILTER=test_modifiers "$TEST"
  FAM=sm90v3w job v3w-det 44 env FLASHC_TEST_FILTER=test_deterministic_bitwise "$TEST"
  FAM=sm90v3w job v3w-strided 44 env FLASHC_TEST_FILTER=test_strided_stream_workspace "$TEST"
  FAM=sm90v3q OMP_NUM_THREADS=3 job v3q-bf16_d128 44 env FLASHC_TEST_FILTER=test_bf16_d128 "$TEST"
  FAM=sm90v3q job v3q-det 44 env FLASHC_TEST_FILTER=test_deterministic_bitwise "$TEST"
else
  echo "s6_bwd5: no $TEST (build with tests on): tests not run"
fi
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s6_bwd5: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of the 110 s) ----
left=$((108 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" --out "$OUT/bwd5.json" \
  --dims 128 --seqlens 2048,4096,16384 --budget-ms 60 \
  --configs flashc_v3w,flashc_v3w_det,flashc_v3q,flashc_v3q_det,flashc_sm90,flashc_sm90_det \
  >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s6_bwd5: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90v3w (v3w-*) or sm90v3q (v3q-*); rc-*: racecheck, sc-*: synccheck, short cases)"
echo "$summary"
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
  sed -n '/^bwd alone/,$p' "$OUT/bench.log"
else
  echo "s6_bwd5: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi
echo "s6_bwd5: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
