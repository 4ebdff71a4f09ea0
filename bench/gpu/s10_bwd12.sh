#!/usr/bin/env bash
# bench/gpu/s10_bwd12.sh BUILD_DIR — helper bwd12 (issue 12), budget 110 s on the H200 (hard
# timeouts: tests + sanitizers + kernel check 45 s, all at once; the bench the rest up to 106 s).
# Question: is sm90v3pd (opt-in, FLASHC_CUDA_BWD_KERNEL=sm90v3pd; src/cuda/attn_bwd_sm90v3.cu,
# PERS) faster than the default's fast mode (sm90v3wg = sm90v3w's kernel)? sm90v3pd is sm90v3w
# on a persistent grid (one block per SM walking (batch, KV head, K/V block) items; under the
# causal mask longest first, the rounds snaking) whose next item's K (and V at d 64) load into a
# second buffer while the current item runs, V at d 128 once the item's last dP^T is done (d
# 128: the second K buffer takes sm90v3w's second dQ staging buffer, 32 KB), so that the
# consumers go from one item's dK, dV stores to the next item's first Q block without a wait.
# bwd10's sm90v3p (single K/V buffer, no longest-first) lost 0.58-0.94x. Fast mode only: its
# deterministic mode is sm90v3wg's kernel (the launcher). ptxas (sm_90a): d 64 0 spills; d 128
# 24 / 60 bytes of spill stores / loads (setmaxnreg 40 / 232; sm90v3w: 24 / 24 at 24 / 240).
#  1. in parallel: racecheck of sm90v3pd on the short fp16 d 128 and bf16 d 64 cases and on
#     test_persistent_bits' short cases (288 items: blocks walking three, K/V buffers reused),
#     synccheck on the short bf16 d 128 ones; sm90v3pd forced: bf16 / fp16 d 64 + d 128 suites
#     (fast + det, GQA, Sq != Sk, odd tails), modifiers, strided + stream + workspace, graph
#     capture, deterministic bitwise; test_persistent_bits (sm90v3pd fast dk, dv == sm90v3w's
#     bit for bit, dq within 2 ulp; det == sm90v3wg det, all bits; sets the family itself);
#     bwd_which.py at d 128 and 64 (the kernel each of (unset), sm90v3w, sm90v3pd launches);
#  2. bench_bwd4.py, d 128 then d 64, S 1k / 2k / 4k / 8k / 16k (B*S = 16k, hidden 2048),
#     causal and not: the default (fast) and sm90v3pd vs SDPA flash (FA2) and cuDNN, one process;
#  3. the decision tables, one a head dim (LAST; bwd_decide.py). Rule: sm90v3pd becomes the
#     fast-mode default at head dim d on CC 9.0 if every pd job passed (pd-*, rc-pd-*, sc-pd-*,
#     pd-bits) and at d: v3pd / default >= 0.98 in every cell and geomean >= 1.03 (the
#     deterministic mode stays sm90v3wg's).
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. Logs in
# $OUT (default BUILD_DIR/out-bwd12).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd12 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
PY=(env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1)

# ---- 1. sanitizers, tests, kernel check (<= 45 s wall, all jobs at once) ----
if command -v compute-sanitizer >/dev/null; then
  FAM=sm90v3pd job rc-pd-f16_d128 43 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_f16_d128 \
    compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 "$TEST"
  FAM=sm90v3pd job rc-pd-bf16_d64 43 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_bf16_d64 \
    compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 "$TEST"
  FAM=sm90v3pd job sc-pd-bf16_d128 43 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_bf16_d128 \
    compute-sanitizer --tool synccheck --report-api-errors no --error-exitcode 9 "$TEST"
  # (the suites' short cases give each block one item; here some walk three: buffers reused)
  job rc-pd-bits 43 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_persistent_bits \
    compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 "$TEST"
else
  echo "s10_bwd12: no compute-sanitizer on PATH: racecheck / synccheck not run"
fi
for s in bf16_d64 f16_d64 bf16_d128 f16_d128; do
  FAM=sm90v3pd job "pd-$s" 43 env FLASHC_TEST_FILTER="test_$s" "$TEST"
done
for t in modifiers strided_stream_workspace graph_capture deterministic_bitwise; do
  FAM=sm90v3pd job "pd-${t%%_*}" 43 env FLASHC_TEST_FILTER="test_$t" "$TEST"
done
job pd-bits 43 env FLASHC_TEST_FILTER=test_persistent_bits "$TEST" # sets the family itself
for d in 128 64; do
  job "which-d$d" 25 "${PY[@]}" python3 bench/gpu/bwd_which.py --lib "$LIB" --d $d \
    --families ",sm90v3w,sm90v3pd"
done
wait_jobs
summary=$(jobs_summary | grep -v '^which-')
jobs_failed && rc_all=1
echo "s10_bwd12: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of the 110 s); sm90v3pd out if one of its jobs failed (a hang would
# eat the budget) ----
cfg=flashc,flashc_v3pd
for n in "$OUT"/pd-*.rc "$OUT"/rc-pd-*.rc "$OUT"/sc-pd-*.rc; do
  [ -e "$n" ] && [ "$(cat "$n")" != 0 ] && cfg=flashc
done
[ "$cfg" = flashc ] && echo "s10_bwd12: a pd job failed: sm90v3pd NOT benched"
left=$((106 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
"${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
  --out "$OUT/bwd12.json" --dims 128,64 --seqlens 1024,2048,4096,8192,16384 --budget-ms 20 \
  --configs "$cfg" >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s10_bwd12: bench TIMED OUT after $left s (partial results below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90v3pd for pd-*; rc-/sc-: racecheck, synccheck on"
echo "   the short cases; pd-bits: sm90v3pd against sm90v3w (fast) / sm90v3wg (det) bits)"
echo "$summary"
echo "== kernels launched (bwd_which.py; sm90v3pd: template argument PERS (the last) = true,"
echo "   its det=1 rows sm90v3wg's kernel (GRP, the one before, true; PERS false))"
cat "$OUT"/which-d*.log | grep -E '^which|Error|error' | cut -c1-200 | head -14
grep -E 'WRONG|^device' "$OUT/bench.log"
grep -q '^bwd alone' "$OUT/bench.log" ||
  { echo "s10_bwd12: bench rc $brc:"; tail -12 "$OUT/bench.log"; }

# ---- 3. the decision tables, one a head dim (bench JSON + the pd jobs' exit codes) ----
for d in 128 64; do
  python3 bench/gpu/bwd_decide.py "$OUT/bwd12.json" "$OUT" --cand flashc_v3pd --base flashc \
    --jobs pd --dims $d --fast-min 0.98 --fast-gm 1.03 --fast-only --rows decided \
    --adopt "sm90v3pd becomes the d $d fast-mode default on CC 9.0 (sm90v3wg stays for det)"
done
echo "s10_bwd12: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
