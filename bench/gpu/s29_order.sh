#!/usr/bin/env bash
# bench/gpu/s29_order.sh BUILD_DIR — issue 12: fast mode's walk of the grid under the causal mask
# (attn_bwd.cu's order_tail, FLASHC_CUDA_BWD_ORDER = C: the last ceil(C SMs / N) heads K block by
# K block; C = 0 head by head, the order before; the first call of 2026-12-06 evening ran C as
# groups of heads walked so). A list-schedule simulation of the bench shapes put head by head at
# 0.93-0.97 of the average load at 1k-8k, the tail walk with C = 2 at 0.98-0.99.
# Parts (S29_PARTS, default "tests lo"):
#   tests  test_bwd_order (new: every (K block, head) once whatever R; dk, dv the same bits),
#          the default families' suites at d 128 / 64 (bf16) and the modifiers;
#   lo     d 128 / 64 causal, S 1k-16k: the default and S29_LO_CONFIGS (default C = 0 / 1 / 4),
#          FA2, cuDNN;
#   hi     d 256 / 192 causal, S 1k / 2k / 8k / 16k: the default, C = 0 / 2 / 1e6, FA2, cuDNN.
#   (nc:   until commit 865d6e4 a part timed FLASHC_CUDA_BWD_ROTATE=1, each K block's walk
#          starting n / N down its Q blocks without a key bound, non-causal; measured 0.94-1.06x
#          the default on the H200 and removed.)
# Budget: S29_CAP seconds for the whole script (default 380). $OUT: lo.json, hi.json, logs.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin order "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch order
F=FLASHC_TEST_FILTER
PARTS=" ${S29_PARTS:-tests lo} "
CAP=${S29_CAP:-380}
if [[ $PARTS == *" tests "* ]]; then
  tjob order 150 - $F=test_bwd_order OMP_NUM_THREADS=8
  tjob d128 120 - $F=test_bf16_d128,test_f16_d64,test_modifiers OMP_NUM_THREADS=8
  tests_done s29_order
fi
if [[ $PARTS == *" lo "* ]]; then
  LO_END=$((CAP - 5))
  [[ $PARTS == *" hi "* ]] && LO_END=$((CAP - 135))
  bwd_bench lo $LO_END --dims 128,64 --causal yes \
    --seqlens 1024,2048,4096,8192,16384 --budget-ms 25 --peers flash,cudnn \
    --configs flashc,${S29_LO_CONFIGS:-flashc_o0,flashc_o1,flashc_o4}
  mv "$OUT/bench.log" "$OUT/lo.log"
fi
if [[ $PARTS == *" hi "* ]]; then
  bwd_bench hi $((CAP - 5)) --dims 256,192 --causal yes --seqlens 1024,2048,8192,16384 \
    --budget-ms 25 --peers flash,cudnn --configs flashc,flashc_o0,flashc_o2,flashc_okm
  mv "$OUT/bench.log" "$OUT/hi.log"
fi
grep -E 'WRONG|^device|Traceback' "$OUT"/*.log 2>/dev/null | head -5
s_pack "$OUT/lo.json" "$OUT/hi.json" "$OUT/lo.log" "$OUT/hi.log"
for f in lo.log hi.log; do
  [ -e "$FINAL/$f" ] && sed -n "/^bwd alone/,\$p" "$FINAL/$f" | grep '^|' | head -34
done
exit $rc_all
