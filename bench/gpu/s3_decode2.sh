#!/usr/bin/env bash
# bench/gpu/s3_decode2.sh BUILD_DIR — issue 13's decode at B = 1 / ctx 4k: the split-KV merge
# variants of src/cuda/attn_decode.cu (FLASHC_DECODE_MERGE = v1 today's default, v2, pdl,
# fused) on the same inputs as SDPA flash and cuDNN, bf16 d 128, Hq 32 / Hkv 8, at B x ctx =
# 1 x 4k, 1 x 32k, 16 x 32k, 1 x 128k, contiguous and paged (page 16, shuffled pages); each
# flashc run is checked against SDPA first. Then, at B = 1, explicit split counts 8..64 for pdl
# and fused (is the automatic 28-42 right once the merge is cheap?). GB/s of K+V and the ratio
# to cuDNN; the short tables are printed last. Needs torch + triton; no rebuild: BUILD_DIR has
# libflashc.so (bench/gpu/final_check.sh). At most 60 s (hard timeout). Log: $OUT/s3_decode2.log
# when OUT is set (else a temporary file).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: s3_decode2.sh BUILD_DIR}
LIB=$BUILD/libflashc.so
[ -f "$LIB" ] || { echo "s3_decode2: no $LIB"; exit 2; }
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; log=$OUT/s3_decode2.log; else log=$(mktemp); fi
PYTHONUNBUFFERED=1 timeout 58 python3 bench/gpu/bench_decode.py --lib "$LIB" \
  --shapes 1x4096,1x32768,16x32768,1x131072 --heads 32/8 --pages 16 \
  --variants v1,v2,pdl,fused --sweep 8,16,24,32,48,64 --sweep-variants pdl,fused \
  --rep-ms "${FLASHC_DECODE2_REP_MS:-30}" ${OUT:+--out "$OUT/s3_decode2.json"} >"$log" 2>&1
rc=$?
[ $rc -eq 124 ] && echo "s3_decode2: TIMED OUT after 58 s (partial log below)"
[ $rc -ne 0 ] && { echo "s3_decode2: rc $rc"; grep -vE '^\|' "$log" | tail -20; }
if grep -q '^merge variants' "$log"; then
  grep -E 'WRONG|^device|^copy' "$log"
  sed -n '/^merge variants/,$p' "$log"
else
  tail -25 "$log"
fi
exit $rc
