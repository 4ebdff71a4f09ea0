#!/usr/bin/env bash
# bench/gpu/s12_fwd22.sh BUILD_DIR — issue 11 (helper fwd22): varlen on the sm90 kernel (the
# sm90vl instances: v6d's kernel with MODS and VL, 3-d tensor maps over the packed rows, guarded
# direct stores of O; attn_fwd_sm90.cu; opt-in FLASHC_CUDA_SM90_VARLEN=1, "force" in the tests
# and the bench: refused where no instance serves the problem).
# Budget: <= 150 s of wall time in all (every step under `timeout`, a global deadline; ~110-140 s
# expected).
#   1. (<= 70 s, concurrently) tests/test_cuda_serving:
#        t-vl    test_prefill_varlen_sm90: 15 varlen cases (ragged sequences with an empty query
#                side, an empty key side, a length-1 query, a length-1 key, rows of no sequence
#                after them; d 64 / 128 / 192 / 256, padded 40 / 96 / 160 / 200, 192 / 128, causal,
#                no mask, windows (37, 19), (20, 5), (50, 50), (0, 0), sliding 256, softcap, ALiBi,
#                MHA / GQA / MQA, 576 tiles), each forced on the sm90vl instance (its tiles
#                asserted), on the sm80 mods instance and on the KV-cache kernel, by the 2x rule
#                against float64; then =force refusing D 36 with a status and a message;
#        t-pm    test_prefill_mods with FLASHC_CUDA_SM90_VARLEN=1 (its varlen cases from 64 rows on
#                the sm90vl instances where they serve them: d 64 / 128 / 256 / 160 / 200 ...);
#        t-var   test_varlen with FLASHC_CUDA_SM90_VARLEN=1;
#      and on the short cases (FLASHC_TEST_SMALL=1: test_prefill_varlen_sm90's first three, forced
#      sm90 only: d 128 causal GQA, d 64 window (37, 19) + ALiBi MQA, d 256 causal softcap)
#      memcheck (mc), racecheck (rc) and synccheck (sc).
#   2. (the time left, <= 75 s, alone on the GPU) bench_prefill.py --set varlen: sm90vl (forced)
#      vs sm80 mods vs SDPA cuDNN (the batch padded to 16 x 4096, and a loop per sequence), bf16,
#      Hq 32 / Hkv 8, 16 sequences of 512-4096 rows (35,008 tokens), d 128 causal, d 64 causal,
#      d 128 without the mask.
# Files in $OUT: fwd22_logs.tgz (every job's log and the bench's), fwd22_bench.json.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_serving); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd22 "${1:-}" tests/test_cuda_serving
TEST=$B/tests/test_cuda_serving
FINAL=$OUT
OUT=$(mktemp -d) # the jobs' logs, packed into one file of $FINAL at the end
T0=$(date +%s)
left() { echo $((147 - ($(date +%s) - T0))); } # seconds left of the 150

# name timeout omp varlen small filter [sanitizer tool]
tst() {
  local n=$1 t=$2 omp=$3 vl=$4 small=$5 filter=$6 tool=${7:-} san=()
  [ -n "$tool" ] && san=(compute-sanitizer --tool "$tool" --error-exitcode 9 --report-api-errors no)
  OMP_NUM_THREADS=$omp job "$n" "$t" env -u FLASHC_CUDA_KERNEL -u FLASHC_CUDA_SM90_DKDV \
    -u FLASHC_CUDA_SM90_MODS -u FLASHC_TEST_SM90_MODS -u FLASHC_CUDA_SM90_VARLEN \
    ${vl:+FLASHC_CUDA_SM90_VARLEN=$vl} FLASHC_TEST_SMALL="$small" \
    FLASHC_TEST_VERBOSE=1 FLASHC_TEST_FILTER="$filter" "${san[@]}" "$TEST"
}
tst t-vl 70 6 "" 0 test_prefill_varlen_sm90
tst t-pm 70 3 1 0 test_prefill_mods
tst t-var 60 1 1 0 test_varlen
tst mc 70 1 "" 1 test_prefill_varlen_sm90 memcheck
tst rc 70 1 "" 1 test_prefill_varlen_sm90 racecheck
tst sc 70 1 "" 1 test_prefill_varlen_sm90 synccheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
fwd_jobs_summary
for n in "${s_names[@]}"; do # which kernel each pass ran (told by the forced route and its tiles)
  l=$OUT/$n.log
  echo "$n: forced sm90vl passes: $(grep -c 'SM90_VARLEN=force.*: the sm90 mods kernel' "$l")," \
    "SM90_VARLEN=0 on sm80: $(grep -c 'SM90_VARLEN=0.*: the sm80 mods kernel' "$l");" \
    "varlen prefill passes by tiles: $(grep -E '^  varlen .*PREFILL_MODS=1.*\[prefill kernel, ' "$l" |
      grep ': o err' | grep -oE 'tiles [0-9]+x[0-9]+' | sort | uniq -c | tr -s ' \n' ' ')"
done
grep -h 'SM90_VARLEN=force, D 36' "$OUT"/t-vl.log | head -2 | cut -c1-240

BENCH_PY=bench/gpu/bench_prefill.py fwd11_bench 75 --set varlen
sed -n '/^cell /,$p' "$OUT/bench.log"
cp "$OUT/bench.json" "$FINAL/fwd22_bench.json" 2>/dev/null
tar czf "$FINAL/fwd22_logs.tgz" -C "$OUT" . && rm -rf "$OUT"
cat <<'RULE'
Reading: the tests hold if t-vl, t-pm, t-var pass (rc 0) and mc / rc / sc report 0 errors /
hazards. On the H200 t-vl's "forced sm90vl passes" must be 15 and "SM90_VARLEN=0 on sm80" 15;
mc / rc / sc 3 forced passes each. t-pm / t-var only report the varlen prefill passes' tiles
(128x128 at d <= 128 on sm90; 128x64 is sm80 above d 64 and sm90 at d 256 alike).
Decision: FLASHC_CUDA_SM90_VARLEN on by default on cc 9.0 at max(D, Dv) <= 128
(SM90_VARLEN_DEFAULT = 1 in attn.cu) if every test passed, no cell of the bench is WRONG / error,
and vl/80 >= 1.03 in every cell of the table; d 192 / 256 stay opt-in (tested, not timed).
RULE
jobs_failed && exit 1
exit $rc
