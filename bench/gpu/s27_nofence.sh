#!/usr/bin/env bash
# bench/gpu/s27_nofence.sh BUILD_DIR — issue 12, after deterministic mode's turn release lost its
# __threadfence (the default since 2026-12-06 midday; s25_detfence.sh measured 1.04-1.24x):
# 1. test_det_fence_bits (new: with and without the fence the same bits, every Hopper default and
#    sm80 forced) and test_deterministic_bitwise on the new default, side by side;
# 2. d 256 / 192, S 2k / 8k / 16k, causal and not: do the late-release kernels' plane counts
#    (attn_bwd.cu's det_planes, tuned with the fence) still hold? fast, det (the default counts),
#    the late kernels over 1 / 2 / 4 planes, the base kernels' det, det with free turns, FA2;
# 3. the d 128 / 64 headline cells, S 1k-16k: fast, det, det with the fence, FA2, cuDNN.
# Budget 230 s (FLASHC_CALL_SCRIPT_LIMIT=230). S27_PARTS (default "tests planes head") picks
# the parts; the benches get what is left of 225 s (planes: of S27_PLANES_CAP, default 165;
# S27_SEQLENS its lengths). $OUT: planes.json, head.json, bench logs.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin nofence "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch nofence
F=FLASHC_TEST_FILTER
PARTS=" ${S27_PARTS:-tests planes head} "
if [[ $PARTS == *" tests "* ]]; then
  tjob fence-bits 70 - $F=test_det_fence_bits OMP_NUM_THREADS=8
  tjob det-bits 70 - $F=test_deterministic_bitwise OMP_NUM_THREADS=8
  tests_done s27_nofence
fi
[[ $PARTS == *" planes "* ]] && bwd_bench planes "${S27_PLANES_CAP:-165}" --dims 256,192 --seqlens "${S27_SEQLENS:-2048,8192,16384}" --budget-ms 20 --peers flash \
  --configs flashc,flashc_det,flashc_l_det,flashc_l_det_p2,flashc_l_det_p4,flashc_base_det,flashc_detfree_nofence
[ -e "$OUT/bench.log" ] && mv "$OUT/bench.log" "$OUT/planes.log"
[[ $PARTS == *" head "* ]] && bwd_bench head 225 --dims 128,64 --seqlens 1024,2048,8192,16384 --budget-ms 25 \
  --peers flash,cudnn --configs flashc,flashc_det,flashc_det_fence
grep -E 'WRONG|^device|Traceback' "$OUT"/*.log 2>/dev/null | head -5
s_pack "$OUT/planes.json" "$OUT/head.json" "$OUT/planes.log" "$OUT/bench.log"
for f in planes.log bench.log; do
  [ -e "$FINAL/$f" ] && sed -n "/^bwd alone/,\$p" "$FINAL/$f" | grep '^|' | head -18
done
exit $rc_all
