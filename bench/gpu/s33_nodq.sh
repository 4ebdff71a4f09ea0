#!/usr/bin/env bash
# bench/gpu/s33_nodq.sh BUILD_DIR — issue 12's leave-one-out of the dQ path at d 192 / 256 (the
# fused sm90h / sm90h2 kernels, whose deterministic mode is 0.70-0.87x fast mode and which run at
# 1.12-1.30x SDPA-FA2): their fast mode (base), fast mode without dQ (nodq:
# FLASHC_CUDA_BWD_NO_DQ=1, a diagnostic: dQ's products, staging and bulk reduce-adds left out, dQ
# zero and not checked) and the late-release deterministic mode (l_det), against SDPA FA2 and
# cuDNN in the same process: bench_bwd4.py, bf16, B*S = 16k, H =
# 2048 / d, S 1k / 2k / 8k / 16k, causal and not. The question: how much of a step is the dQ path,
# i.e. what the dK / dV half of a backward would cost if dQ had a kernel of its own (no turns, no
# fp32 adds: deterministic by construction). nodq/fast > 1 is the share dQ takes: time without
# dQ = time / (nodq/fast). Budget 140 s (hard timeout 135 s). $OUT: nodq.json, bench.log; the
# table LAST. Beside them sm90hs (hs, hs_det), the split family that answer led to: the fused
# kernels without dQ, then dQ by attn_bwd_dq_sm90.cu's kernel (deterministic in both modes).
# S33_CONFIGS overrides the configurations, S33_PEERS the peers, S33_DIMS the head dims.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin nodq "${1:-}"
s_scratch nodq
T0=$SECONDS
rc_all=0
bwd_bench nodq 135 --dims "${S33_DIMS:-256,192}" --seqlens 1024,2048,8192,16384 --budget-ms 30 \
  --peers "${S33_PEERS-flash,cudnn}" --configs "${S33_CONFIGS:-flashc_base,flashc_nodq,flashc_l_det,flashc_hs,flashc_hs_det}"
grep -E 'WRONG|^device|Traceback' "$OUT/bench.log" | head -5
sed -n '/^bwd alone/,$p' "$OUT/bench.log" | head -40
s_pack "$OUT/nodq.json" "$OUT/bench.log"
exit $rc_all
