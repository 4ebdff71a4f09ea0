#!/usr/bin/env bash
# bench/gpu/s12_fwd21.sh BUILD_DIR — issue 11 (helper fwd21): dense windows, softcap and ALiBi on
# the sm90 kernel's mods instances (v6's kernel with MODS set, attn_fwd_sm90.cu; opt-in
# FLASHC_CUDA_SM90_MODS=1, "force" in the tests and the bench: refused where they do not serve).
# Budget: <= 200 s of wall time in all (every step under `timeout`, a global deadline; ~120-150 s
# expected).
#   1. (<= 95 s, concurrently) tests/test_cuda_serving:
#        t-m     test_prefill_mods_sm90: 22 dense cases (d 64 / 128 / 192 / 256 and padded 8 /
#                40 / 96 / 160 / 200, Dk != Dv, windows (37, 19) with empty rows, (0, 0),
#                (-1, 40), left-only, causal sliding windows, softcap, ALiBi, combinations, Sq 64,
#                512 tiles; Sq 1 on the KV-cache kernel), each forced on the sm90 mods instance
#                (its tiles asserted), on the sm80 mods instance and on the KV-cache kernel, by
#                the 2x rule against float64;
#        t-v9, t-v9np, t-v6  the same with FLASHC_TEST_SM90_MODS=v9 / v9np / v6: its bf16 cases
#                of head dim 65-128 (5) forced on that alternative instance (bf16 d 128 only);
#        t-pm    test_prefill_mods with FLASHC_CUDA_SM90_MODS=1 (its dense cases from 64 rows on
#                the sm90 mods instances where they serve them: d 40 / 72 / 192 / 224 / 256 and
#                the Dk != Dv ones);
#        t-dm    test_dense_modifiers with FLASHC_CUDA_SM90_MODS=1 (d 128, 150 x 260, GQA 4);
#      and on the short cases (FLASHC_TEST_SMALL=1: test_prefill_mods_sm90's first three, forced
#      sm90 only: d 128 window + softcap + ALiBi causal, d 64 (37, 19) with Sq > Sk, d 256 softcap)
#      memcheck (mc) and racecheck (rc), and racecheck with the first case on v9 (rc9).
#   2. (the time left, <= 90 s, alone on the GPU) bench_prefill.py --set mods: sm90 mods (forced;
#      at d 128 also the alternatives v6 (with ping-pong), v9, v9np) vs sm80 mods vs SDPA (mem-efficient with a mask for the window and ALiBi; the plain causal
#      cuDNN as the ceiling), bf16, Hq 32 / Hkv 8, B x S = 16k, d 128 and 64, S 2k and 8k, causal,
#      window 1024 / softcap 30 / ALiBi.
# Files in $OUT: fwd21_logs.tgz (every job's log and the bench's), fwd21_bench.json.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_serving); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd21 "${1:-}" tests/test_cuda_serving
TEST=$B/tests/test_cuda_serving
FINAL=$OUT
OUT=$(mktemp -d) # the jobs' logs, packed into one file of $FINAL at the end
T0=$(date +%s)
left() { echo $((197 - ($(date +%s) - T0))); } # seconds left of the 200

# name timeout omp mods alt small filter [sanitizer tool]
tst() {
  local n=$1 t=$2 omp=$3 mods=$4 alt=$5 small=$6 filter=$7 tool=${8:-} san=()
  [ -n "$tool" ] && san=(compute-sanitizer --tool "$tool" --error-exitcode 9 --report-api-errors no)
  OMP_NUM_THREADS=$omp job "$n" "$t" env -u FLASHC_CUDA_KERNEL -u FLASHC_CUDA_SM90_DKDV \
    -u FLASHC_CUDA_SM90_MODS ${mods:+FLASHC_CUDA_SM90_MODS=$mods} \
    ${alt:+FLASHC_TEST_SM90_MODS=$alt} FLASHC_TEST_SMALL="$small" \
    FLASHC_TEST_VERBOSE=1 FLASHC_TEST_FILTER="$filter" "${san[@]}" "$TEST"
}
tst t-m 95 4 "" "" 0 test_prefill_mods_sm90
tst t-v9 95 2 "" v9 0 test_prefill_mods_sm90
tst t-v9np 95 2 "" v9np 0 test_prefill_mods_sm90
tst t-v6 95 2 "" v6 0 test_prefill_mods_sm90
tst t-pm 95 2 1 "" 0 test_prefill_mods
tst t-dm 60 1 1 "" 0 test_dense_modifiers
tst mc 95 1 "" "" 1 test_prefill_mods_sm90 memcheck
tst rc 95 1 "" "" 1 test_prefill_mods_sm90 racecheck
tst rc9 95 1 "" v9 1 test_prefill_mods_sm90 racecheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
fwd_jobs_summary
for n in "${s_names[@]}"; do # which kernel each pass ran (told by the forced route and its tiles)
  l=$OUT/$n.log
  echo "$n: forced sm90 mods passes: $(grep -c 'SM90_MODS=force.*: the sm90 mods kernel' "$l")," \
    "on an alternative: $(grep -cE 'SM90_MODS=v[0-9a-z]+ .*: the sm90 mods kernel' "$l");" \
    "SM90_MODS=1 on sm80 (not served): $(grep -c 'SM90_MODS=1.*: the sm80 mods kernel' "$l");" \
    "SM90_MODS=0 on sm80: $(grep -c 'SM90_MODS=0.*: the sm80 mods kernel' "$l");" \
    "dense prefill passes by tiles: $(grep -E '^  dense .*PREFILL_MODS=1.*\[prefill kernel, tiles .*: o err' "$l" |
      grep -oE 'tiles [0-9]+x[0-9]+' | sort | uniq -c | tr -s ' \n' ' ')"
done

BENCH_PY=bench/gpu/bench_prefill.py fwd11_bench 90 --set mods
sed -n '/^cell /,$p' "$OUT/bench.log"
cp "$OUT/bench.json" "$FINAL/fwd21_bench.json" 2>/dev/null
jobs_ok=1
jobs_failed && jobs_ok=0
tar czf "$FINAL/fwd21_logs.tgz" -C "$OUT" . && rm -rf "$OUT"
cat <<'RULE'
Reading: the tests hold if t-m, t-v9, t-v9np, t-v6, t-pm, t-dm pass (rc 0) and mc / rc / rc9
report 0 errors / hazards.
On the H200 t-m's "forced sm90 mods passes" must be 21 (every case but Sq 1, which runs on the
KV-cache kernel), "SM90_MODS=1 on sm80 (not served)" 0, "SM90_MODS=0 on sm80" 21; t-v9 /
t-v9np / t-v6: 16 forced + 5 on the alternative; mc / rc 3 forced passes each, rc9 2 + 1.
t-pm / t-dm only report the dense passes' tiles (128x80: d 192 on sm90; 128x64 is sm80 above
d 64 and sm90 at d 256 alike).
Decision: FLASHC_CUDA_SM90_MODS on by default on cc 9.0 (SM90_MODS_DEFAULT = 1 in attn.cu) if every
test passed, no cell of the bench is WRONG / error, and v6/80 >= 1.03 in every cell of the table;
if it holds only from some length or head dim, a threshold there (as SM90_NP_* does). At d 128
an alternative replaces v6 in the default set (its bf16 entry; fp16 to follow) if its tests
passed and best/80 >= 1.03 x v6/80 in at least 4 of the 6 d 128 cells and no cell below 0.98 x.
RULE
[ "$jobs_ok" = 1 ] || exit 1 # (the rc files went with $OUT)
exit $rc
