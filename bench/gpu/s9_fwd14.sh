#!/usr/bin/env bash
# bench/gpu/s9_fwd14.sh BUILD_DIR — issue 11 (helper fwd14): the sm90 forward's softmax under its
# own P V. In every default kernel (v6 at d 128, v9 at d 128 causal from 4k, v7 at d 64) ptxas
# hoists wgmma.wait_group 0 (the wait for the P V issued beside S) above the softmax's
# exponentials, so only the row max overlaps that P V (SASS: WARPGROUP.DEPBAR before the 88 /
# 64 MUFU.EX2 of a block). Opt-in FLASHC_CUDA_KERNEL=sm90v10 is those kernels (v9's at d 128
# under the mask, v6's without it, v7's at d 64: VER 14 / 12 / 13) with the row sums stored to
# shared memory before the wait, which holds the exponentials under the P V (bench/RESULTS.md,
# "Issue 11: the softmax under the P V").
# Budget: <= 120 s of wall time in all (every step under `timeout`, a global deadline):
#   1. (<= 50 s, concurrently) tests/test_cuda_attn with sm90v10 forced: the full bf16 / fp16
#      suites at d 128 (1k pairs, (3, 799), (20000, 16), both masks) and test_key_tail (every
#      class of Sk mod 176); test_long_causal (4k causal, tiles crossing boundaries); the full
#      bf16 / fp16 suites at d 64; every fixed test on the short cases (many tiles, graph
#      replay, repeatable, strided, errors, refusals); racecheck on test_many_tiles' short
#      cases (all three kernels: the tile queue, empty tiles, the new per-thread store);
#      memcheck on test_many_tiles' and test_key_tail's short cases.
#   2. (<= 66 s, alone on the GPU) bench_fwd11.py --set cells: flashc (the default), flashc_v10
#      (sm90v10), SDPA cuDNN and SDPA flash (FA2) on the same inputs at d 128 2k / 4k / 16k and
#      d 64 2k / 4k, causal and not (batch x seqlen = 16384, hidden 2048), do_bench with its L2
#      flush in 2 interleaved rounds and the CUPTI kernel time. Table last, then the rule.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd14 "${1:-}" tests/test_cuda_attn
TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
left() { echo $((117 - ($(date +%s) - T0))); } # seconds left of the 120

# name timeout small dims only-tests [sanitizer tool]; sm90v10 forced
tst() {
  local n=$1 t=$2 small=$3 dims=$4 only=$5 tool=${6:-} san=()
  [ -n "$tool" ] && san=(compute-sanitizer --tool "$tool" --error-exitcode 9 --report-api-errors no)
  job "$n" "$t" env FLASHC_CUDA_KERNEL=sm90v10 FLASHC_TEST_SMALL="$small" FLASHC_TEST_DIMS="$dims" \
    FLASHC_TEST_ONLY="$only" "${san[@]}" "$TEST"
}
OMP_NUM_THREADS=3 tst v10-d128 50 0 128 test_bf16_d128,test_fp16_d128,test_key_tail
OMP_NUM_THREADS=3 tst v10-long 50 0 128 test_long_causal
OMP_NUM_THREADS=1 tst v10-d64 50 0 64 test_bf16_d64,test_fp16_d64
OMP_NUM_THREADS=1 tst v10-fixed 50 1 64,128 ""
OMP_NUM_THREADS=1 tst rc-many 50 1 64,128 test_many_tiles racecheck
OMP_NUM_THREADS=1 tst mc-small 50 1 64,128 test_many_tiles,test_key_tail memcheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
for n in "${s_names[@]}"; do
  log=$OUT/$n.log rc=$(cat "$OUT/$n.rc" 2>/dev/null || echo '?')
  echo "$n: rc $rc$([ "$rc" = 124 ] && echo ' (timed out)'), $(grep -c ': o err' "$log") cases," \
    "$(grep -c 'not served' "$log") not served, $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$log" |
      tr '\n' ' ')$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sed 's/^========= //')"
  if [ "$rc" != 0 ]; then # cmocka's own failure lines, the sanitizer's first sites
    grep -E '^\[ +(ERROR|FAILED|LINE) +\]|^\[ RUN|Invalid|Race reported|(Read|Write) access' "$log" |
      grep -vE 'FAILED  \] [0-9]' | tail -8 | cut -c1-240 | sed 's/^/    /'
  fi
done

tb=$(left)
[ "$tb" -gt 66 ] && tb=66
if [ "$tb" -gt 15 ]; then
  FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    timeout -k 2 "$tb" python3 bench/gpu/bench_fwd11.py --lib "$LIB" --set cells --rounds 2 \
    --alt flashc_v10:FLASHC_CUDA_KERNEL=sm90v10 --rep-ms "${FLASHC_REP_MS:-20}" \
    --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  rc=$?
else
  echo "no time left for the bench" >"$OUT/bench.log"
  rc=1
fi
echo "bench rc $rc$([ "$rc" = 124 ] && echo ' (timed out)') (+$(($(date +%s) - T0)) s)"
grep -E 'WRONG|Error|error|Traceback|^device' "$OUT/bench.log" | cut -c1-240 | head -8
sed -n '/^| d | S | causal/,$p' "$OUT/bench.log" | cut -c1-200
cat <<'RULE'
Rule (per kernel; "/flashc" = flashc_v10 against the default in the same run):
  v6 cells (d 128 non-causal 2k/4k/16k), v9 cells (d 128 causal 2k/4k/16k; at 2k the default
  is v6, so there it reads v9+fence against v6), v7 cells (d 64, all four): make that kernel's
  v10 twin the default in those cells (src/cuda/attn_fwd_sm90.cu: the sm90v10 entry takes the
  default flag and threshold of the entry it copies, which is removed) if every job above passed
  (v10-d128, v10-long, v10-d64, v10-fixed; rc-many and mc-small clean) and "/flashc kernel"
  averages >= 1.01 over the group's cells with none below 0.985 and "/flashc flush" averages
  >= 1.0. Otherwise v10 stays opt-in (removed if it averages below 1.0).
RULE
jobs_failed && exit 1
exit $rc
