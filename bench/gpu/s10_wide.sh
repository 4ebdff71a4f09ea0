#!/usr/bin/env bash
# bench/gpu/s10_wide.sh BUILD_DIR — issue 11: the whole d 192 / 256 suites on the two families
# made the defaults there from s10_fwd18.sh's run (whose forced suites hit their 45 s limit with
# no failure after 219 cases each): sm90v6hnp at d 256, sm90v6hw at d 192, bf16 and fp16, every
# seqlen pair, causal and not, MHA / GQA / MQA, test_many_tiles and test_refusals; beside them
# racecheck of the short d 256 cases on sm90v6hnp. Budget: <= 115 s (every job under timeout).
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin wide "${1:-}" tests/test_cuda_attn
TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
# name timeout family dim small threads only [sanitizer tool]
tst() { # name seconds family dims small omp only [tool]
  OMP_NUM_THREADS=$6 tjob "$1" "$2" "${8:-}" FLASHC_CUDA_KERNEL="$3" FLASHC_TEST_SMALL="$5" \
    FLASHC_TEST_DIMS="$4" FLASHC_TEST_ONLY="$7"
}
tst t-hnp256 110 sm90v6hnp 256 0 6 test_refusals,test_many_tiles,test_bf16_d256,test_fp16_d256
tst t-hw192 110 sm90v6hw 192 0 6 test_refusals,test_many_tiles,test_bf16_d192,test_fp16_d192
tst rc-hnp256 110 sm90v6hnp 256 1 1 test_fp16_d256 racecheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
fwd_jobs_summary "not served"
