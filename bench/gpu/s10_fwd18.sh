#!/usr/bin/env bash
# bench/gpu/s10_fwd18.sh BUILD_DIR — issue 11 (helper fwd18): the sm90 forward at d 192 and 256,
# FLASHC_CUDA_KERNEL=sm90v6h (v6 on 64-key blocks), sm90v6hnp (the same without ping-pong) and
# sm90v6hw (80-key blocks; at d 256 with direct stores of O), all opt-in (bench/RESULTS.md,
# "Issue 11: sm90 forward at d 192/256"). Budget: <= 100 s of wall time in all (every step
# under `timeout`, a global deadline; ~80 s expected).
#   1. (<= 45 s, concurrently) tests/test_cuda_attn with each family forced: the bf16 / fp16
#      suites of D 192 and 256 (every seqlen pair, causal and not, MHA / GQA / MQA; (1023,1024)
#      (1024,1023) (1024,1024), (3,799) and (20000,16)), test_many_tiles (256 tiles at d 256,
#      192 causal tiles at d 192 of which 4 in 6 see no key: the tile scheduler; its d 64 / 128
#      cases are not served) and test_refusals. Each family serves all of D 192 / 256 and none
#      of the d 64 / 128 cases. Beside them, on the short cases (FLASHC_TEST_SMALL=1):
#      racecheck of d 256 on sm90v6h and of d 192 on sm90v6hw, memcheck of d 192 and the small
#      many-tiles cases (144 tiles at d 256 and 192) on sm90v6hnp and of d 256 on sm90v6hw.
#   2. (the time left, <= 60 s, alone on the GPU) bench_fwd11.py --set wide: the default (sm80
#      at these dims), flashc_h (sm90v6h), flashc_hnp (sm90v6hnp), flashc_hw (sm90v6hw), SDPA
#      cuDNN and SDPA flash (FA2) on the same inputs, d 256 and 192 at 1k / 2k / 4k / 8k / 16k,
#      causal and not (batch x seqlen = 16384, H = 2048 / d), each flashc instance checked
#      against SDPA flash, 3 interleaved rounds of do_bench (L2 flush) and the CUPTI kernel
#      time. Then wide_table.py: per family the table (TFLOP/s, ratio to cuDNN and to sm80)
#      and the rule's verdict per (d, mask).
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd18 "${1:-}" tests/test_cuda_attn
TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
left() { echo $((97 - ($(date +%s) - T0))); } # seconds left of the 100

ONLY=test_refusals,test_many_tiles
for dt in bf16 fp16; do
  for d in 192 256; do ONLY+=",test_${dt}_d$d"; done
done
# name timeout family small threads only [sanitizer tool]
tst() { # name seconds family small omp only [tool]
  OMP_NUM_THREADS=$5 tjob "$1" "$2" "${7:-}" FLASHC_CUDA_KERNEL="$3" FLASHC_TEST_SMALL="$4" \
    FLASHC_TEST_DIMS=192,256 FLASHC_TEST_ONLY="$6"
}
tst t-h 45 sm90v6h 0 4 "$ONLY"
tst t-hnp 45 sm90v6hnp 0 4 "$ONLY"
tst t-hw 45 sm90v6hw 0 4 "$ONLY"
tst rc-h 45 sm90v6h 1 1 test_bf16_d256 racecheck
tst mc-hnp 45 sm90v6hnp 1 1 test_fp16_d192,test_many_tiles memcheck
tst rc-hw 45 sm90v6hw 1 1 test_fp16_d192 racecheck
tst mc-hw 45 sm90v6hw 1 1 test_bf16_d256 memcheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
fwd_jobs_summary "not served"

fwd11_bench 60 --set wide --rounds 3 --alt flashc_h:FLASHC_CUDA_KERNEL=sm90v6h \
  --alt flashc_hnp:FLASHC_CUDA_KERNEL=sm90v6hnp --alt flashc_hw:FLASHC_CUDA_KERNEL=sm90v6hw
[ -s "$OUT/bench.json" ] && (cd bench/gpu && python3 wide_table.py "$OUT/bench.json")
cat <<'RULE'
Reading: best = the fastest sm90 family in kernel time; best/sm80 = sm80's time / its own (> 1:
sm90 is faster), best/cuDNN = cuDNN's / its own (kernel time); TF = TFLOP/s in kernel time; the
"launched" lines must name sm90 kernels.
The rule holds only if t-h, t-hnp and t-hw passed with 0 "not served" (the d 192 / 256 suites
served whole: no "D=..: N cases ran" line; test_many_tiles' d 64 / 128 cases are refused
silently, its d 192 / 256 ones run) and rc-* / mc-* report 0 hazards / errors; then,
per (d, mask), the family the verdict names becomes the default from that seqlen (the variant
table's by_default / default_min_seq with sm90_supports_nc / _c, attn_fwd_sm90.cu), sm80 below.
RULE
jobs_failed && exit 1
exit $rc
