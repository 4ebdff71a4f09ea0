#!/usr/bin/env bash
# bench/gpu/s10_fwd17.sh BUILD_DIR — issue 11 (helper fwd17): the sm90 defaults at every head dim
# D <= 128 with D % 8 == 0, padded by the copy engine (FLASHC_CUDA_SM90_PAD=1, opt-in; bench/
# RESULTS.md, "Issue 11: every head dim <= 128 on sm90 by TMA padding"). Budget: <= 90 s of wall
# time in all (every step under `timeout`, a global deadline; ~75 s expected).
#   1. (<= 40 s, concurrently) tests/test_cuda_attn with FLASHC_CUDA_SM90_PAD=1 and each default
#      family forced (sm90v6, sm90v7, sm90v9, sm90np) and with none (the dispatcher's choice):
#      the bf16 / fp16 suites of D 8 32 40 72 80 96 104 112 120 (every seqlen pair, causal and
#      not, MHA / GQA / MQA; (1023,1024) (1024,1023) (1024,1024) at 96), D 59 (must be refused
#      by a forced sm90 family: D % 8 != 0), test_pitched_rows (D % 8 != 0 refused; D 40 / 96
#      in rows of 64 / 128: the store of O must leave the columns >= D unwritten) and
#      test_refusals. A family serves all of a head dim's cases or none (the suite fails a
#      mix): v6 and v9 serve 8-120, v7 8-64 (its instance is d 64), np 72-120 (its d 64 causal
#      kernel stores O directly, so np pads at d 128 only). Then memcheck and racecheck of the
#      short padded cases (FLASHC_TEST_SMALL=1) on v6 (d 40, d 96) and v7 (d 32).
#   2. (<= 48 s, alone on the GPU) bench_fwd11.py --set pad: the default (sm80 at these dims),
#      flashc_pad (FLASHC_CUDA_SM90_PAD=1: np at d 96, v7 at d 32 from 2k), SDPA cuDNN and SDPA
#      flash (FA2) on the same inputs, d 96 and d 32 at 2k / 4k, causal and not (batch x seqlen
#      = 16384, H = 2048 / d), each flashc instance checked against SDPA flash, 2 interleaved
#      rounds of do_bench (L2 flush) and the CUPTI kernel time. Then pad_table.py: the table
#      and the rule's verdict per (d, mask).
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd17 "${1:-}" tests/test_cuda_attn
TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
left() { echo $((87 - ($(date +%s) - T0))); } # seconds left of the 90

DIMS=8,32,40,59,72,80,96,104,112,120
ONLY=test_refusals,test_pitched_rows
for dt in bf16 fp16; do
  for d in ${DIMS//,/ }; do ONLY+=",test_${dt}_d$d"; done
done
# name timeout family small dims only [sanitizer tool]; FLASHC_CUDA_SM90_PAD=1 always
tst() { # name seconds family small dims only [tool]
  tjob "$1" "$2" "${7:-}" FLASHC_CUDA_SM90_PAD=1 ${3:+FLASHC_CUDA_KERNEL=$3} FLASHC_TEST_SMALL="$4" \
    FLASHC_TEST_DIMS="$5" FLASHC_TEST_ONLY="$6"
}
export OMP_NUM_THREADS=2
for fam in sm90v6 sm90v7 sm90v9 sm90np; do tst "t-$fam" 40 "$fam" 0 "$DIMS" "$ONLY"; done
tst t-default 40 "" 0 "$DIMS" "$ONLY"
tst mc-v6 40 sm90v6 1 40,96 test_bf16_d40,test_fp16_d96 memcheck
tst mc-v7 40 sm90v7 1 32 test_bf16_d32 memcheck
tst rc-v6 40 sm90v6 1 96 test_bf16_d96 racecheck
tst rc-v7 40 sm90v7 1 40 test_fp16_d40 racecheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
fwd_jobs_summary "dims not served"

fwd11_bench 48 --set pad --rounds 2 --alt flashc_pad:FLASHC_CUDA_SM90_PAD=1
[ -s "$OUT/bench.json" ] && python3 bench/gpu/pad_table.py "$OUT/bench.json"
cat <<'RULE'
Reading: pad/sm80 = sm80's time / the padded sm90 kernel's (> 1: padding is faster); sm80/cuDNN
and pad/cuDNN = cuDNN's time / flashc's (kernel time); "pad's kernel" must name an sm90 kernel.
The rule holds only if every t-* job passed with exactly these "dims not served" (bf16 + fp16:
v6 2 and v9 2 (d 59), v7 14 (59, 72-120), np 8 (8, 32, 40, 59), default 0) and mc-* / rc-*
report 0 errors / hazards; then,
per (d, mask), "padded sm90 the default" means: FLASHC_CUDA_SM90_PAD's padding on by default
for that head-dim range and mask (attn_fwd_sm90.cu, sm90_pad_enabled / sm90_pads).
RULE
jobs_failed && exit 1
exit $rc
