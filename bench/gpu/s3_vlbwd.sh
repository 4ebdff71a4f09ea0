#!/usr/bin/env bash
# bench/gpu/s3_vlbwd.sh BUILD_DIR — the CUDA varlen backward vs the dense one at the same work
# (bench/gpu/bench_vlbwd.py: 8 ragged sequences, 16k tokens, bf16, d 128, causal; fwd+bwd and
# bwd alone, fast and deterministic). BUILD_DIR is an existing build (libflashc.so in it); no
# rebuild. At most 30 s (hard timeout); log and json under $OUT when set. Table printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s3_vlbwd.sh BUILD_DIR}
OUT=${OUT:-}
log=${OUT:+$OUT/s3_vlbwd.log}
FLASHC_LIBRARY="$(cd "$B" && pwd)/libflashc.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
  timeout 30 python3 bench/gpu/bench_vlbwd.py ${OUT:+--out "$OUT/s3_vlbwd.json"} \
  >"${log:-/dev/stdout}" 2>&1
rc=$?
[ -n "$log" ] && tail -12 "$log"
echo "s3_vlbwd: rc $rc"
exit $rc
