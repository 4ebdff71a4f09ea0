#!/usr/bin/env bash
# bench/gpu/s19_head_bwd.sh BUILD_DIR — issue 12's headline cells on the backward defaults as they
# stand after 2026-12-06 (sm90v3d deterministic at d 64, sm90h2 at d 192, sm90h at d 256, and
# whatever s18_bwd23.sh's verdict flipped), fast and deterministic, against SDPA FA2 and cuDNN in
# the same process: bench_bwd4.py, bf16, B*S = 16k, H = 2048 // d, d 128 / 64 / 192 / 256 at
# S 1k / 2k / 8k / 16k, causal and not; each flashc configuration's gradients checked against
# SDPA flash's first (WRONG if not). Budget 150 s (hard timeout 145 s). $OUT: head_bwd.json,
# bench.log; the table LAST.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin head_bwd "${1:-}"
s_scratch head_bwd
T0=$SECONDS
rc_all=0
bwd_bench head_bwd 145 --dims 128,64,192,256 --seqlens 1024,2048,8192,16384 --budget-ms 30 \
  --peers flash,cudnn --configs flashc,flashc_det
grep -E 'WRONG|^device|Traceback' "$OUT/bench.log" | head -5
sed -n '/^bwd alone/,$p' "$OUT/bench.log" | head -60
s_pack "$OUT/head_bwd.json" "$OUT/bench.log"
exit $rc_all
