#!/usr/bin/env bash
# bench/gpu/s9_bwd8.sh BUILD_DIR — helper bwd8 (issue 12), budget 150 s on the H200 (hard
# timeouts: tests 50 s, the kernel check 20 s, bench the rest up to 145 s; ~90 s expected).
# Question: does sm90v3w3 or sm90v3w3l (src/cuda/attn_bwd_sm90v3.cu, opt-in through
# FLASHC_CUDA_BWD_KERNEL) beat the d 64 default sm90v3w? sm90v3w3 is sm90v3w at d 64 with a third
# Q/dO/LSE/D stage in the producer's ring (178 KB of shared memory instead of 162), so that the
# producer has two Q blocks, not one, to refill a stage both consumer warpgroups released, and
# the two warpgroups (which at d 64 meet only at that release) can drift two Q blocks apart;
# sm90v3w3l is sm90v3w3 whose producer stores LSE log2 e, so that the consumers' elementwise
# step drops 48 instructions a thread a Q block (FMUL, FSETP, FSEL per row; same bits).
#  1. in parallel, for X = sm90v3w3 and sm90v3w3l: compute-sanitizer racecheck of X on the
#     short fp16 d 64 cases (FLASHC_TEST_SMALL=1: GQA, causal, both modes), synccheck on the
#     short bf16 ones (sm90v3w3 only: w3l differs in two producer instructions); the forced-
#     family tests of test_cuda_attn_bwd (full cases): bf16 / fp16 d 64 suites (fast +
#     deterministic, GQA, Sq != Sk), modifiers (window, softcap, ALiBi; d 64 on the family;
#     deterministic repeats bit for bit), the deterministic bitwise test, strided + stream +
#     workspace;
#  2. bench/gpu/bwd_which.py: the kernel each of (unset), sm90v3w, sm90v3w3, sm90v3w3l launches
#     at d 64 (a forced family that does not serve falls back silently; this shows it did not);
#  3. bench/gpu/bench_bwd4.py, d 64 then d 128, S 1k / 2k / 4k / 16k (B*S = 16k, hidden 2048),
#     causal and not: the default (sm90v3w at both) and at d 64 sm90v3w3, sm90v3w3l, each fast
#     + deterministic, against SDPA flash (FA2) and cuDNN in the same process; then the decision
#     tables (LAST; bench/gpu/bwd_decide.py, once per candidate), whose rule is:
#       X qualifies as the d 64 default on CC 9.0 if every test and sanitizer job of it passed
#       (v3w3-*.rc, rc-v3w3-*, sc-v3w3-*; v3w3l-*, rc-v3w3l-*), at every d 64 shape X / default
#       >= 0.98 in fast mode with a geometric mean >= 1.03, and X's deterministic mode >= 0.98x
#       the default's at every d 64 shape; if both qualify, the higher geomean (each DECISION
#       line names its branch).
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. Logs in
# $OUT (default BUILD_DIR/out-bwd8).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd8 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
PY=(env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1)

# ---- 1. sanitizers and tests (<= 50 s wall, all jobs at once) ----
if command -v compute-sanitizer >/dev/null; then
  for x in v3w3 v3w3l; do
    FAM=sm90$x job rc-$x-f16_d64 48 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_f16_d64 \
      compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 "$TEST"
  done
  FAM=sm90v3w3 job sc-v3w3-bf16_d64 48 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_bf16_d64 \
    compute-sanitizer --tool synccheck --report-api-errors no --error-exitcode 9 "$TEST"
else
  echo "s9_bwd8: no compute-sanitizer on PATH: racecheck / synccheck not run"
fi
for x in v3w3 v3w3l; do
  for s in bf16_d64 f16_d64; do
    FAM=sm90$x job "$x-$s" 48 env FLASHC_TEST_FILTER="test_$s" "$TEST"
  done
  FAM=sm90$x job $x-mods 48 env FLASHC_TEST_FILTER=test_modifiers "$TEST"
  FAM=sm90$x job $x-det 48 env FLASHC_TEST_FILTER=test_deterministic_bitwise "$TEST"
  FAM=sm90$x job $x-strided 48 env FLASHC_TEST_FILTER=test_strided_stream_workspace "$TEST"
done
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s9_bwd8: tests took $((SECONDS - T0)) s"

# ---- 2. which kernel each family value launches (<= 20 s) ----
which_out=$("${PY[@]}" timeout -k 2 20 python3 bench/gpu/bwd_which.py --lib "$LIB" --d 64 \
  --families ",sm90v3w,sm90v3w3,sm90v3w3l" 2>&1)
[ $? -ne 0 ] && rc_all=1

# ---- 3. bench (the rest of the 150 s) ----
left=$((145 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
"${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
  --out "$OUT/bwd8.json" --dims 64,128 --seqlens 1024,2048,4096,16384 --budget-ms 60 \
  --configs flashc,flashc_det,flashc_v3w3,flashc_v3w3_det,flashc_v3w3l,flashc_v3w3l_det \
  --configs-d128 flashc,flashc_det >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s9_bwd8: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90<job prefix>; rc-*: racecheck, sc-*: synccheck, short cases)"
echo "$summary"
echo "== kernels launched (bwd_which.py; the last two template arguments: sm90v3w 2, false;"
echo "   sm90v3w3 3, false; sm90v3w3l 3, true)"
echo "$which_out" | grep -E '^which|Error|error' | head -10
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
else
  echo "s9_bwd8: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi

# ---- 4. the decision table (from the bench's JSON and the jobs' exit codes) ----
python3 bench/gpu/bwd_decide.py "$OUT/bwd8.json" "$OUT" --cand flashc_v3w3 --base flashc \
  --jobs v3w3 --dims 64 --fast-min 0.98 --fast-gm 1.03 --det-min 0.98 \
  --adopt "sm90v3w3 qualifies as the d 64 default on CC 9.0 (branch bwd8-default-w3)"
python3 bench/gpu/bwd_decide.py "$OUT/bwd8.json" "$OUT" --cand flashc_v3w3l --base flashc \
  --jobs v3w3l --dims 64 --fast-min 0.98 --fast-gm 1.03 --det-min 0.98 --rows decided \
  --adopt "sm90v3w3l qualifies as the d 64 default on CC 9.0 (branch bwd8-default-w3l)"
echo "(both qualify: take the higher geomean; neither: sm90v3w stays)"
echo "s9_bwd8: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
