#!/usr/bin/env bash
# bench/gpu/s9_fwd16.sh BUILD_DIR — issue 11 (helper fwd16): do the sm90 forward's defaults
# run faster without ping-pong? Budget: <= 100 s of wall time in all (every step under
# `timeout`, a global deadline; ~80 s expected). fwd15's leave-one-out (bench/RESULTS.md) found
# v6 without the consumers' turns 1.027x faster at d 128 non-causal 2k (16k unresolved). Opt-in
# FLASHC_CUDA_KERNEL=sm90np = for each problem the dispatcher's sm90 kernel without ping-pong
# (bf16 and fp16, d 64 and 128, both masks): v6 (d 128, 176-key blocks without the mask, 128
# under it), v9 (d 128 causal from 4k), v7 (d 64, 3 consumers: no turn order among the three;
# causal from 2k), v5 (d 64 causal below 2k).
#   1. (<= 42 s, concurrently) tests/test_cuda_attn with sm90np forced: the bf16 / fp16 d 64 /
#      d 128 suites (all cases, both masks), test_many_tiles + test_key_tail, test_long_causal
#      (d 128 causal 4k: v9's shape; d 64 causal 2k: v7's); racecheck of test_many_tiles' short
#      cases (the consumers' own-warpgroup barriers where the turns were).
#   2. (<= 55 s, alone on the GPU) bench_fwd11.py --set np: the default (flashc), sm90np
#      (flashc_np), SDPA cuDNN and SDPA flash (FA2) on the same inputs, d 128 at 1k/2k/4k/8k/16k
#      and d 64 at 1k/2k/4k/16k, causal and not (batch x seqlen = 16384, hidden 2048), each
#      flashc instance checked against SDPA flash, 3 interleaved rounds of do_bench (L2 flush)
#      and the CUPTI kernel time. Then np_table.py: the per-cell table and the rule's verdict.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd16 "${1:-}" tests/test_cuda_attn
TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
left() { echo $((97 - ($(date +%s) - T0))); } # seconds left of the 100

# name timeout small only dims [sanitizer tool]; sm90np forced
tst() { # name seconds small only dims [tool]
  tjob "$1" "$2" "${6:-}" FLASHC_CUDA_KERNEL=sm90np FLASHC_TEST_SMALL="$3" FLASHC_TEST_DIMS="$5" \
    FLASHC_TEST_ONLY="$4"
}
export OMP_NUM_THREADS=2
for dt in bf16 fp16; do
  for d in 64 128; do tst "t-$dt-d$d" 42 0 "test_${dt}_d$d" "$d"; done
done
tst t-tiles 42 0 test_many_tiles,test_key_tail ""
OMP_NUM_THREADS=4 tst t-long 42 0 test_long_causal ""
tst rc-tiles 42 1 test_many_tiles "" racecheck
wait_jobs
echo "(tests and racecheck +$(($(date +%s) - T0)) s)"
fwd_jobs_summary

fwd11_bench 55 --set np --rounds 3 --alt flashc_np:FLASHC_CUDA_KERNEL=sm90np
[ -s "$OUT/bench.json" ] && python3 bench/gpu/np_table.py "$OUT/bench.json"
cat <<'RULE'
Reading: np/def = the default's time / sm90np's (> 1: faster without ping-pong); def/cuDNN and
np/cuDNN = cuDNN's time / flashc's (kernel time). The rule holds only if every t-* job passed
with 0 "not served" and rc-tiles reports 0 hazards; then, per (head dim, mask), the printed
"sm90np the default for seqlen <= T" is what branch fwd16-default's table entries should say
(bench/RESULTS.md, "Issue 11: the defaults without ping-pong"); "nothing changes": no switch.
RULE
jobs_failed && exit 1
exit $rc
