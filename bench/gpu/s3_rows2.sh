#!/usr/bin/env bash
# bench/gpu/s3_rows2.sh BUILD_DIR — the RMSNorm kernel variants (issue 14: bf16 16384 x 4096
# forward >= 3.9 TB/s and >= 1.2x F.rms_norm, backward >= 3.4 TB/s) in one process, <= 30 s:
# forward, forward + residual and backward for each variant of src/cuda/rows.cu (v2 and the v3
# rings, by FLASHC_CUDA_RMS_FWD / FLASHC_CUDA_RMS_BWD, which the library reads at every call)
# against F.rms_norm, eager x + r then F.rms_norm, autograd of F.rms_norm and a same-run
# torch clone of the (T, D) tensor. BUILD_DIR: built already (libflashc.so in it); no rebuild.
# Log and JSON in $OUT (default BUILD_DIR/out-rows2); the table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s3_rows2.sh BUILD_DIR}
lib=$(realpath "$B")/libflashc.so
[ -f "$lib" ] || { echo "s3_rows2: $lib not found"; exit 2; }
OUT=${OUT:-$(realpath "$B")/out-rows2}
mkdir -p "$OUT"
FLASHC_LIBRARY="$lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" timeout -k 2 28 \
  python3 bench/gpu/bench_rows2.py --out "$OUT/rows2.json" >"$OUT/rows2.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "s3_rows2: rc $rc"; tail -15 "$OUT/rows2.log"; }
sed -n '/^RMSNorm bf16/,$p' "$OUT/rows2.log"
exit $rc
