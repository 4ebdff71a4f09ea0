#!/usr/bin/env bash
# bench/gpu/s3_prefill.sh BUILD_DIR — the prefill kernel's masks / varlen path against the old
# route (FLASHC_CUDA_PREFILL_MODS=0, the KV-cache kernel) and SDPA, bf16 d 128: varlen causal
# (8 ragged sequences, 16k tokens), dense causal with a 1024-key window at 8k, and Dk != Dv
# 192/128 causal at 8k
# (bench/gpu/bench_prefill.py says what is compared). Needs torch + triton; no rebuild: the
# build dir has libflashc.so already (bench/gpu/final_check.sh). At most 60 s (hard timeout).
# Log: $OUT/s3_prefill.log when OUT is set (else a temporary file). The table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: s3_prefill.sh BUILD_DIR}
LIB=$BUILD/libflashc.so
[ -f "$LIB" ] || { echo "s3_prefill: no $LIB"; exit 2; }
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; log=$OUT/s3_prefill.log; else log=$(mktemp); fi
timeout 60 python3 bench/gpu/bench_prefill.py --lib "$LIB" --rep-ms "${FLASHC_PREFILL_REP_MS:-60}" \
  ${OUT:+--out "$OUT/s3_prefill.json"} >"$log" 2>&1
rc=$?
[ $rc -eq 124 ] && echo "s3_prefill: TIMED OUT after 60 s (partial log below)"
[ $rc -ne 0 ] && { echo "s3_prefill: rc $rc"; grep -v '^case \|^varlen \|^window ' "$log" | tail -15; }
sed -n '/^case /,$p' "$log"
exit $rc
