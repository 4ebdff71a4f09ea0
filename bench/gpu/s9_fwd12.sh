#!/usr/bin/env bash
# bench/gpu/s9_fwd12.sh BUILD_DIR — issue 11 (helper fwd12): the key tail of the sm90 forward's
# v6 at d 128 (opt-in FLASHC_CUDA_FWD_TAIL=1: a tile's first block, its last keys, as S over
# 128 of its 176 keys when its rows see no more; bench/RESULTS.md "Issue 11: the key tail"),
# and the default after FLASHC_CUDA_FWD_PDL's removal (atomicAdd claim, no griddepcontrol).
# Budget: <= 80 s of wall time in all (every step under `timeout`, a global deadline):
#   1. (<= 38 s, concurrently) tests/test_cuda_attn at d 128: with the tail on the default
#      dispatch, test_key_tail (every class of Sk mod 176, causal and not, Sq 1024: v6) and
#      test_bf16_d128 (the suite: the 1k pairs take v6; f16 in test_key_tail); with the tail on
#      sm90v6w forced (v6's kernel under the causal mask too) test_key_tail; the default (no
#      tail) test_key_tail and test_many_tiles (the claim back to atomicAdd); memcheck and
#      racecheck of test_key_tail's short cases with the tail on sm90v6w.
#   2. (<= 40 s, alone on the GPU) bench_fwd11.py --set fwd12: flashc (default), flashc_tail
#      (FLASHC_CUDA_FWD_TAIL=1) and SDPA cuDNN on the same inputs at d 128 2k / 4k / 16k,
#      non-causal and causal (batch x seqlen = 16384, hidden 2048), each timed by do_bench with
#      its L2 flush and by its CUPTI kernel time. Table last.
# Rule: make the tail the default if every job passes (sanitizers clean) and flashc_tail is
# >= 1.02x flashc (flush and kernel) at 2k and 4k non-causal and >= 0.99x in the other rows.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd12 "${1:-}" tests/test_cuda_attn
TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
left() { echo $((78 - ($(date +%s) - T0))); } # seconds left of the 80

# name timeout tail(0/1) family(- = the default) small only-tests [sanitizer tool]
tst() {
  local n=$1 t=$2 tail=$3 fam=$4 small=$5 only=$6 tool=${7:-} san=()
  [ "$fam" = - ] && fam=
  [ -n "$tool" ] && san=(compute-sanitizer --tool "$tool" --error-exitcode 9 --report-api-errors no)
  job "$n" "$t" env FLASHC_CUDA_KERNEL="$fam" FLASHC_TEST_SMALL="$small" FLASHC_TEST_DIMS=128 \
    FLASHC_TEST_ONLY="$only" FLASHC_CUDA_FWD_TAIL="$([ "$tail" = 1 ] && echo 1)" "${san[@]}" "$TEST"
}
OMP_NUM_THREADS=5 tst tail-def 38 1 - 0 test_key_tail,test_bf16_d128
OMP_NUM_THREADS=4 tst tail-v6w 38 1 sm90v6w 0 test_key_tail
OMP_NUM_THREADS=4 tst def 38 0 - 0 test_key_tail,test_many_tiles
OMP_NUM_THREADS=1 tst mc-tail 38 1 sm90v6w 1 test_key_tail memcheck
OMP_NUM_THREADS=1 tst rc-tail 38 1 sm90v6w 1 test_key_tail racecheck
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
[ "$tb" -gt 40 ] && tb=40
if [ "$tb" -gt 12 ]; then
  FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    timeout -k 2 "$tb" python3 bench/gpu/bench_fwd11.py --lib "$LIB" --set fwd12 \
    --alt flashc_tail:FLASHC_CUDA_FWD_TAIL=1 --rep-ms "${FLASHC_REP_MS:-20}" \
    --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  rc=$?
else
  echo "no time left for the bench" >"$OUT/bench.log"
  rc=1
fi
echo "bench rc $rc$([ "$rc" = 124 ] && echo ' (timed out)') (+$(($(date +%s) - T0)) s)"
grep -E 'WRONG|Error|error|Traceback|^device' "$OUT/bench.log" | cut -c1-240 | head -8
grep -E '^main ' "$OUT/bench.log" | cut -c1-300
sed -n '/^| d | S | causal/,$p' "$OUT/bench.log" | cut -c1-200
cat <<'RULE'
Rule: FLASHC_CUDA_FWD_TAIL=1 becomes the default if every job above passed (tail-def, tail-v6w,
def, memcheck and racecheck clean) and flashc_tail / flashc ("/flashc" columns, flush and
kernel) is >= 1.02 at 2048 and 4096 non-causal and >= 0.99 in the other rows.
RULE
jobs_failed && exit 1
exit $rc
