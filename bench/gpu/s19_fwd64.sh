#!/usr/bin/env bash
# bench/gpu/s19_fwd64.sh BUILD_DIR — issue 11's short d 64 cells (seqlen 512-1k asks >= 0.95x
# cuDNN; the H100 run of 2026-12-06 morning: causal 1k 0.82x, non-causal 1k 0.94x): does a family
# the dispatcher does not pick there do better, with today's knobs (HGEVEN, SKIPDEAD on)?
# bench_fwd11.py --set c64 --rounds 3 (d 64, B*S = 16k, H 32; causal 512 / 1k / 2k, non-causal
# 512 / 1k), the default against alts forcing sm90v7, sm90v6, sm90v6d, sm90v5, sm90v6s, sm90v4w,
# SDPA cuDNN and FA2 in the same process (each flashc instance checked against FA2 first).
# Budget 90 s (hard timeout 85 s). $OUT: c64.json, c64.log; the table LAST (per cell: TFLOP/s
# flush / kernel, x cuDNN, each alt / the default).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd64 "${1:-}"
alts=()
for f in sm90v7 sm90v6 sm90v6d sm90v5 sm90v6s sm90v4w; do alts+=(--alt "$f:FLASHC_CUDA_KERNEL=$f"); done
env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 85 python3 bench/gpu/bench_fwd11.py --lib "$LIB" --set c64 --rounds 3 "${alts[@]}" \
  --out "$OUT/c64.json" >"$OUT/c64.log" 2>&1
rc=$?
echo "s19_fwd64: bench rc $rc$([ $rc = 124 ] && echo ' (timed out)')"
grep -E 'WRONG|Traceback|Error|left out' "$OUT/c64.log" | head -8
grep -E '^\|' "$OUT/c64.log" | tail -45
exit $rc
