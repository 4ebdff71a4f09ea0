#!/usr/bin/env bash
# bench/gpu/s9_bwd9.sh BUILD_DIR — helper bwd9 (issue 12), budget 100 s on the H200 (hard
# timeouts: tests and sanitizers 42 s, all at once; bench the rest up to 95 s).
# Question: does sm90v3wg (src/cuda/attn_bwd_sm90v3.cu, opt-in through FLASHC_CUDA_BWD_KERNEL)
# lift the deterministic mode at d 64 non-causal, where round 1 (2026-12-04) measured det / fast
# 0.71-0.73 at 1k-4k (issue 12's target: >= 0.8)? sm90v3wg is sm90v3w whose deterministic mode
# without an upper key bound takes each block's (K block, head) from its linear index in groups
# of G heads (G = ceil(4 SMs / Q blocks a block), bwd90v3_grouped), so that a head's K blocks no
# longer start together and queue on every Q block's turn; the turn rule and so the order of dQ
# adds are sm90v3w's: the same bits (test_det_grouped_bits compares them). Its fast mode and its
# causal deterministic mode are sm90v3w's kernels (fast mode unchanged by construction).
#  1. in parallel: compute-sanitizer racecheck of sm90v3wg on the short fp16 d 64 and d 128
#     cases (FLASHC_TEST_SMALL=1: GQA, causal, both modes), synccheck on the short bf16 d 64
#     ones; the forced tests (full cases): bf16 / fp16 d 64 and d 128 suites (fast + det, GQA,
#     Sq != Sk), modifiers (windows incl. left-only, softcap, ALiBi; det repeated bit for bit),
#     the deterministic bitwise test, strided + stream + workspace; test_det_grouped_bits
#     (sm90v3wg det == sm90v3w det bit for bit, twice, d 64 / 128, bf16 / fp16, causal, window);
#     bwd_which.py at d 64 and 128 (the kernels the family launches: the last template argument
#     true in det mode, the GRP instance);
#  2. bench_bwd4.py, d 64 then d 128, S 1k / 2k / 4k / 16k (B*S = 16k, hidden 2048), causal and
#     not: the default fast and det and sm90v3wg det, against SDPA FA2 and cuDNN, one process;
#  3. the decision table (LAST; bwd_decide.py). Rule: sm90v3wg qualifies (its det mode becomes
#     sm90v3w's, i.e. GRP on in the default family) if every job passed, wg det / default det
#     >= 0.98 at every shape (d 64 and d 128, causal and not) and its geometric mean over the
#     d 64 non-causal shapes >= 1.05.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. Logs in
# $OUT (default BUILD_DIR/out-bwd9).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd9 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
PY=(env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1)

# ---- 1. sanitizers, tests, kernel check (<= 42 s wall, all jobs at once) ----
if command -v compute-sanitizer >/dev/null; then
  for s in f16_d64 f16_d128; do
    FAM=sm90v3wg job rc-wg-$s 42 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_$s \
      compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 "$TEST"
  done
  FAM=sm90v3wg job sc-wg-bf16_d64 42 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_bf16_d64 \
    compute-sanitizer --tool synccheck --report-api-errors no --error-exitcode 9 "$TEST"
else
  echo "s9_bwd9: no compute-sanitizer on PATH: racecheck / synccheck not run"
fi
for s in bf16_d64 f16_d64 bf16_d128 f16_d128; do
  FAM=sm90v3wg job "wg-$s" 42 env FLASHC_TEST_FILTER="test_$s" "$TEST"
done
FAM=sm90v3wg job wg-mods 42 env FLASHC_TEST_FILTER=test_modifiers "$TEST"
FAM=sm90v3wg job wg-det 42 env FLASHC_TEST_FILTER=test_deterministic_bitwise "$TEST"
FAM=sm90v3wg job wg-strided 42 env FLASHC_TEST_FILTER=test_strided_stream_workspace "$TEST"
job wg-bits 42 env FLASHC_TEST_FILTER=test_det_grouped_bits "$TEST" # sets the family itself
for d in 64 128; do
  job wg-which$d 42 "${PY[@]}" python3 bench/gpu/bwd_which.py --lib "$LIB" --d $d \
    --families ",sm90v3w,sm90v3wg"
done
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s9_bwd9: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of the 100 s) ----
left=$((95 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
"${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
  --out "$OUT/bwd9.json" --dims 64,128 --seqlens 1024,2048,4096,16384 --budget-ms 50 \
  --configs flashc,flashc_det,flashc_v3wg_det >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s9_bwd9: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90v3wg but wg-bits, wg-which*; rc-*: racecheck,"
echo "   sc-*: synccheck, short cases)"
echo "$summary"
echo "== kernels launched (the last template argument: GRP, true only for sm90v3wg det=1)"
cat "$OUT"/wg-which64.log "$OUT"/wg-which128.log 2>/dev/null | grep -E '^which|Error|error' |
  cut -c1-200 | head -14
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
else
  echo "s9_bwd9: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi

# ---- 3. the decision table (from the bench's JSON and the jobs' exit codes) ----
# cand = base = flashc (the fast kernels are the same); the det columns: v3wg_det against
# flashc_det (sm90v3w's det), det / fast of each
python3 bench/gpu/bwd_decide.py "$OUT/bwd9.json" "$OUT" --cand flashc --base flashc \
  --cand-det flashc_v3wg_det --jobs wg --dims 64,128 --fast-min 0 --det-min 0.98 \
  --det-gm 1.05 --det-gm-dims 64 --det-gm-causal no \
  --adopt "sm90v3wg's det order for the default (GRP on in sm90v3w's det mode)"
echo "s9_bwd9: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
