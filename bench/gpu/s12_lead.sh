#!/usr/bin/env bash
# bench/gpu/s12_lead.sh BUILD_DIR — the lead's part of the afternoon round of 2026-12-04 (issue
# 12), budget 100 s on the H200 (hard timeout 95 s). The CUDA backward now serves every head
# dim on the mma.sync family (instances 32, 64, 96, 128, 192, 256, each taking the dims above
# the one before, zero-padded in shared memory) and Dk != Dv; its correctness is in
# test_cuda_attn_bwd (final_check's shared job). This times the sm80 route where it is what
# runs on the H200 (d 96 and 256, whose instances gained the column bounds; the padded 160 and
# 192; 80 through the 96 instance), fast and deterministic, against SDPA FA2 and cuDNN in one
# process: bench_bwd4.py, bf16, B*S = 16k, H = 2048 // d, S 2k / 8k, causal and not. These are
# the first recorded backward figures at these dims (no A/B against the tree before: the
# change's ptxas counts are in bench/RESULTS.md).
# BUILD_DIR: built already (libflashc.so); $OUT gets lead.json and bench.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin lead "${1:-}"
env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 95 python3 bench/gpu/bench_bwd4.py --lib "$LIB" --out "$OUT/lead.json" \
  --dims 96,80,160,192,256 --seqlens 2048,8192 --budget-ms 40 --configs flashc,flashc_det \
  >"$OUT/bench.log" 2>&1
rc=$?
echo "s12_lead: bench rc $rc$([ $rc = 124 ] && echo ' (timed out)')"
grep -E 'WRONG|Error|Traceback' "$OUT/bench.log" | head -5
sed -n '/^bwd alone/,$p' "$OUT/bench.log" | head -40
exit $rc
