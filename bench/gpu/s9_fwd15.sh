#!/usr/bin/env bash
# bench/gpu/s9_fwd15.sh BUILD_DIR — issue 11 (helper fwd15): the leave-one-out table of the sm90
# forward's default kernel at d 128 without the mask (v6: 176-key blocks, 2 K/V stages, dynamic
# tile scheduler on a persistent grid, O by TMA store), what each of FlashAttention-3's stages is
# worth there. Opt-in FLASHC_CUDA_KERNEL=sm90abl (bf16, d 128; v6's causal kernel under the mask)
# with FLASHC_SM90_ABLATE=
#   none      v6 itself (another library instance: the noise floor)
#   overlap   S_i waited for together with P_{i-1} V (no softmax under the P V)     VER 33, new
#   pingpong  no turns between the two consumers                                     VER 34, new
#   dynamic   persistent grid, static tile walk                                      VER 36, new
#   persist   one tile per thread block (hardware block scheduler)                   VER 40, new
#   stores    direct stores of O instead of the TMA store                       = v6d (VER 6)
#   bn128     128-key blocks                                                    = v6n
#   s2d, s3d  128-key blocks, direct stores, 2 / 3 stages (3 of 176 keys do not fit: 296 KB
#             with Q)                                                 = v6d causal's instance / v6s
# (In v6 ptxas waits for the P V before the exponentials, so v6's "overlap" is the row max's
# alone; sm90v10, which held them under it, was timed here in round 1 of 2026-12-04 and removed:
# bench/RESULTS.md, "Issue 11: leave-one-out (helper fwd15)".)
# Budget: <= 100 s of wall time in all (every step under `timeout`, a global deadline):
#   1. (<= 40 s, concurrently, one job per variant) tests/test_cuda_attn with sm90abl forced and
#      FLASHC_SM90_ABLATE=each: the bf16 d 128 suite on its short cases (both masks: the causal
#      ones run v6's kernel), test_many_tiles (240 tiles of 128 rows: persistent walks, the tile
#      queue) and test_key_tail (Sk classes mod 176) on their short cases; with `none`, the fp16
#      suite too (refused whole, FLASHC_ERR_UNSUPPORTED) and the fixed tests; racecheck of
#      test_many_tiles' short cases for pingpong (its own-warpgroup barriers) and persist.
#   2. (<= 56 s, alone on the GPU) bench_fwd11.py --set abl: flashc (the default, v6), the 9
#      sm90abl instances, SDPA cuDNN and SDPA flash (FA2) on the same inputs at d 128
#      non-causal 2k and 16k (batch x seqlen = 16384, hidden 2048): each flashc instance checked
#      against SDPA flash, then do_bench with its L2 flush in 3 interleaved rounds and the CUPTI
#      kernel time. Then abl_table.py: the table and "stage X is worth Y %".
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd15 "${1:-}" tests/test_cuda_attn
TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
left() { echo $((97 - ($(date +%s) - T0))); } # seconds left of the 100
VARIANTS="none overlap pingpong dynamic persist stores bn128 s2d s3d"

# name ablation timeout small only-tests [sanitizer tool]; sm90abl forced, d 128
tst() { # name ablate seconds small only [tool]
  tjob "$1" "$3" "${6:-}" FLASHC_CUDA_KERNEL=sm90abl FLASHC_SM90_ABLATE="$2" FLASHC_TEST_SMALL="$4" \
    FLASHC_TEST_DIMS=128 FLASHC_TEST_ONLY="$5"
}
export OMP_NUM_THREADS=1
for v in $VARIANTS; do
  tst "t-$v" "$v" 40 1 test_bf16_d128,test_many_tiles,test_key_tail
done
tst t-none-fixed none 40 1 "" # every test: the fp16 suite refused whole, errors, graphs, strides
tst rc-pingpong pingpong 40 1 test_many_tiles racecheck
tst rc-persist persist 40 1 test_many_tiles racecheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
fwd_jobs_summary

alts=()
for v in $VARIANTS; do alts+=(--alt "flashc_$v:FLASHC_CUDA_KERNEL=sm90abl,FLASHC_SM90_ABLATE=$v"); done
fwd11_bench 56 --set abl --rounds 3 "${alts[@]}"
[ -s "$OUT/bench.json" ] && python3 bench/gpu/abl_table.py "$OUT/bench.json"
cat <<'RULE'
Reading: "stage X is worth Y %" = kernel time without X / v6's - 1 (CUPTI kernel time, same run);
flashc_none's line is the noise between two instances of the same kernel: a stage whose worth is
within twice that is not resolved. Nothing here changes a default; a variant that beats v6 by
>= 1.02x in kernel time at both cells with its tests passed is a finding to follow up (its stage
costs more than it gives at d 128 non-causal), not a switch.
RULE
jobs_failed && exit 1
exit $rc
