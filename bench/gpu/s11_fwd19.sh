#!/usr/bin/env bash
# bench/gpu/s11_fwd19.sh BUILD_DIR — issue 11 (helper fwd19): head dims 136-248 (D % 8 == 0) on
# the sm90 d 192 / 256 kernels, padded by the copy engine (FLASHC_CUDA_SM90_PAD, opt-in; bench/
# RESULTS.md, "Issue 11: head dims 136-248 padded into the d 192 / 256 kernels"). Budget: <= 170 s
# of wall time in all (every step under `timeout`, a global deadline; ~80-100 s expected).
#   1. (<= 75 s, concurrently) tests/test_cuda_attn with the padding on and a family forced:
#      the bf16 / fp16 suites of D 136 160 200 224 248 (every short seqlen pair, causal and not,
#      MHA / GQA / MQA, LSE; (3,799) (20000,16) at 160 and 224: a key tail over 10-13 blocks,
#      157 Q tiles a head), test_pitched_rows (D 160 / 224 in rows of 176 / 248 elements: the
#      copy engine must read zeros, not the pitch's NaN poison, for the columns >= D, and the
#      store of O must leave them unwritten) and test_refusals:
#        t-hw   sm90v6hw, FLASHC_CUDA_SM90_PAD=192 (a list: the d 192 instance only): serves
#               136 / 160, refuses 200 / 224 / 248 (its d 256 kernel stores O directly);
#        t-np1, t-np2  sm90v6hnp, FLASHC_CUDA_SM90_PAD=1: every dim (split in two jobs);
#        t-h    sm90v6h, FLASHC_CUDA_SM90_PAD=128,256: 200 / 248 served, 136 refused (short
#               pairs only).
#      Beside them, on the short cases (FLASHC_TEST_SMALL=1): racecheck of d 224 on sm90v6hnp and
#      of d 160 on sm90v6hw, memcheck of d 200 and 136 on sm90v6hnp.
#   2. (the time left, <= 85 s, alone on the GPU) bench_fwd11.py --set padw: the default,
#      flashc_pad (FLASHC_CUDA_SM90_PAD=1: d 136 / 160 on sm90v6hw d 192, d 200 / 224 on
#      sm90v6hnp d 256, d 96 / 112 on the d 128 defaults), flashc_sm80 (FLASHC_CUDA_KERNEL=
#      sm80), SDPA cuDNN and SDPA flash (FA2) on the same inputs, bf16, d 160 / 224 at 1k / 2k /
#      8k, d 136 / 200 at 2k and d 96 / 112 at 1k / 8k, causal and not (batch x seqlen = 16384,
#      H = 2048 // d; 24 cells), each flashc instance checked against SDPA flash, 3 interleaved
#      rounds of do_bench (L2 flush) and the CUPTI kernel time. Then padw_table.py: the table
#      and the rule's verdict per padded instance.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd19 "${1:-}" tests/test_cuda_attn
TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
left() { echo $((167 - ($(date +%s) - T0))); } # seconds left of the 170

only() { # DIMS [TEST...]: FLASHC_TEST_ONLY for both dtypes' suites of DIMS, and TEST...
  local d dt o=
  for dt in bf16 fp16; do for d in ${1//,/ }; do o+=",test_${dt}_d$d"; done; done
  shift
  for d in "$@"; do o+=",$d"; done
  echo "${o#,}"
}
# name timeout family pad small threads dims only [sanitizer tool]
tst() { # name seconds family pad small omp dims only [tool]
  OMP_NUM_THREADS=$6 tjob "$1" "$2" "${9:-}" FLASHC_CUDA_KERNEL="$3" FLASHC_CUDA_SM90_PAD="$4" \
    FLASHC_TEST_SMALL="$5" FLASHC_TEST_DIMS="$7" FLASHC_TEST_ONLY="$8"
}
ALL=136,160,200,224,248
tst t-hw 75 sm90v6hw 192 0 4 $ALL "$(only $ALL test_refusals test_pitched_rows)"
tst t-np1 75 sm90v6hnp 1 0 4 136,160,200 "$(only 136,160,200 test_pitched_rows)"
tst t-np2 75 sm90v6hnp 1 0 4 224,248 "$(only 224,248 test_refusals)"
tst t-h 75 sm90v6h 128,256 0 1 136,200,248 "$(only 136,200,248)"
tst rc-np 75 sm90v6hnp 1 1 1 224 test_fp16_d224 racecheck
tst rc-hw 75 sm90v6hw 1 1 1 160 test_bf16_d160 racecheck
tst mc-np 75 sm90v6hnp 1 1 1 136,200 test_bf16_d200,test_fp16_d136 memcheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
fwd_jobs_summary "not served"

fwd11_bench 85 --set padw --rounds 3 --alt flashc_pad:FLASHC_CUDA_SM90_PAD=1 \
  --alt flashc_sm80:FLASHC_CUDA_KERNEL=sm80
[ -s "$OUT/bench.json" ] && (cd bench/gpu && python3 padw_table.py "$OUT/bench.json")
cat <<'RULE'
Reading: pad/sm80 = sm80's time / the padded sm90 kernel's (> 1: padding is faster), in CUPTI
kernel time and under do_bench's flush; the "launched" lines: flashc_pad must name sm90 kernels
(d 136 / 160: <.., 192, 80, 2, 7>; d 200 / 224: <.., 256, 64, 2, 71>; d 96 / 112: d 128 ones),
flashc_sm80 sm80 ones, flashc (the default) sm80 at d 136-224 and sm90 at d 96 / 112.
The tests hold only if every t-* job passed with exactly these "not served" lines (bf16 + fp16):
t-hw 6 (D 200, 224, 248), t-np1 0, t-np2 0, t-h 2 (D 136), and rc-* / mc-* report 0 hazards /
errors. Then per instance, "padding on by default" (padw_table.py's verdict) means: its bit in
SM90_PAD_DEFAULT (attn_fwd_sm90.cu; 4 = d 192, 8 = d 256; the verdict's last line gives the
value); the d 128 line confirms (or not) today's default at 1k and 8k.
RULE
jobs_failed && exit 1
exit $rc
