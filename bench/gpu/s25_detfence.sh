#!/usr/bin/env bash
# bench/gpu/s25_detfence.sh BUILD_DIR — issue 12: what the __threadfence before each
# deterministic turn's release costs. s23_lplanes.sh found the late-release kernels with every
# turn free at only 0.70-0.81x fast mode: the mode's own instructions cost 20-30% of a step. Per
# turn they are: the adds' completion (cp.async.bulk.wait_group 0, a proxy fence; or a barrier),
# then one thread's __threadfence (fence.sc.gpu) and red.release.gpu, and the next turn's
# ld.acquire.gpu. red.release is a release pattern of its own (cumulative over what the thread
# observed), so the fence orders nothing more; FLASHC_CUDA_BWD_DET_FENCE=0 drops it in every
# family (bwd_release_turn, attn_bwd_common.cuh). Budget 180 s. 1. under FENCE=0:
# test_deterministic_bitwise (3 runs bit for bit), test_late_release_d192_d256, test_det_planes,
# racecheck of test_deterministic_bitwise's short cases; 2. bench_bwd4.py d 256 / 192 / 128 /
# 64, S 2k / 16k, causal and not: fast, det, det_nofence, FA2 (call it with
# FLASHC_CALL_SCRIPT_LIMIT=180).
# nofence / det >= 1.03 and the tests clean: the release alone becomes the default.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin detfence "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch detfence
F=FLASHC_TEST_FILTER N=FLASHC_CUDA_BWD_DET_FENCE=0
tjob n-bits 60 - $F=test_deterministic_bitwise $N OMP_NUM_THREADS=4
tjob n-late 60 - $F=test_late_release_d192_d256 $N OMP_NUM_THREADS=4
tjob n-planes 60 - $F=test_det_planes $N OMP_NUM_THREADS=4
tjob n-racecheck 60 racecheck $F=test_deterministic_bitwise FLASHC_TEST_SMALL=1 $N
tests_done s25_detfence
bwd_bench detfence 172 --dims 256,192,128,64 --seqlens 2048,16384 --budget-ms 20 --peers flash \
  --configs flashc,flashc_det,flashc_det_nofence
grep -E 'WRONG|^device|Traceback' "$OUT/bench.log" | head -5
s_pack "$OUT/detfence.json" "$OUT/bench.log"
sed -n "/^bwd alone/,\$p" "$FINAL/bench.log" | head -24
exit $rc_all
