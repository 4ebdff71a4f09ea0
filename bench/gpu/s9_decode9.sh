#!/usr/bin/env bash
# bench/gpu/s9_decode9.sh BUILD_DIR — helper decode9 (issue 13), budget 120 s hard on the H200
# (every step under its own timeout, cut to what is left of 118 s): why the split kernel streams
# K + V at ~91% of DRAM at large B (4..64 x 32k..128k) where SDPA cuDNN reaches ~96%. No new
# kernel: the defaults (lean + fill + auto) and the opt-in lean3, measured three ways.
#  1. (<= 24 s, side by side) tests/test_cuda_serving: lean3 forced (FLASHC_DECODE_KERNEL and
#     FLASHC_TEST_KERNELS), short cases; compute-sanitizer memcheck of the short test_kvcache_*
#     cases on lean3 (the candidate of the ncu step; the defaults are in the shared suites).
#  2. (<= 26 s, if ncu is on PATH) Nsight Compute at 16 x 32k (Hq 32 / Hkv 8, d 128, bf16), 3 calls
#     each after triton's 256 MB zero_, --cache-control none: the defaults, lean3, SDPA cuDNN's
#     kernels, on the usual cache (B, ctx, Hkv, d) and on a head-major one ((B, Hkv, ctx, d)
#     buffers seen as (B, ctx, Hkv, d)): time, DRAM read, DRAM %, warps active.
#  3. (<= 46 s) bench/gpu/bench_decode.py, the issue's grid: B {1,4,16,64} x ctx {4k,32k,128k},
#     Hq/Hkv 32/8 and 16/8, d 128, bf16, the defaults contiguous and page 16 (each checked against
#     SDPA first), against SDPA flash / cuDNN in the same process.
#  4. (<= 12 s) the same on head-major caches (contiguous), 32/8 at 16x32k, 64x32k, 4x128k,
#     16x128k: flashc and cuDNN on the same memory.
#  5. (the rest) split sweep at B 16 / 64 (2, 3, 4, 6 splits against the rule's count): the tail
#     of the split count (64 x 32k: 512 tiles x 2 splits = 2.6 waves of the 396 slots).
#  The decision table last (TABLE below, from the JSON files).
# Reading / decision rules (for the lead; RESULTS.md, issue 13, decode9):
# - head-major: if flashc there is >= 1.03x flashc on the usual cache at B >= 16 while cuDNN
#   gains < 2%, the 256-byte pieces of 2 KB (b, key) rows, read by 8 different blocks, are the
#   gap: the next kernel reads all KV heads of a key range in one block (one 2 KB row a key). If
#   flashc gains < 2% there, the access pattern is not the cause (then ncu's DRAM % and warps).
# - sweep: a count >= 1.02x the rule's at 64x32k or 16x128k (and not below 0.99x elsewhere)
#   means the split rule's tail costs that much: a whole-wave rule for large B is the fix.
# - lean3 (ncu only): split-kernel time <= 0.98x the defaults' at 16x32k means more bytes in
#   flight a warp helps at large B (it did not in 2026-12-02's bench).
# BUILD_DIR: a built tree with tests (libflashc.so, tests/test_cuda_serving), e.g. build-final of
# bench/gpu/final_check.sh. Logs and JSON in $OUT (default BUILD_DIR/out-decode9).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin decode9 "${1:-}" tests/test_cuda_serving
T=$B/tests/test_cuda_serving
T0=$SECONDS
DEF=lean+fill+auto L3=lean3+fill+auto
REP=${FLASHC_DECODE9_REP_MS:-10}
left() { local l=$((118 - (SECONDS - T0))); [ "$l" -lt "$1" ] && l=$1; [ "$l" -gt "$2" ] && l=$2; echo $l; }
py() { PYTHONUNBUFFERED=1 timeout -k 2 "$@"; }

# ---- 1. tests on lean3 ----
OMP_NUM_THREADS=4 job serving_l3 24 env FLASHC_DECODE_KERNEL=lean3 FLASHC_TEST_KERNELS=lean3 \
  FLASHC_TEST_SMALL=1 "$T"
if command -v compute-sanitizer >/dev/null; then
  job memcheck_l3 24 env FLASHC_DECODE_KERNEL=lean3 FLASHC_TEST_SMALL=1 FLASHC_TEST_KERNELS=lean3 \
    FLASHC_TEST_FILTER='test_kvcache_*' \
    compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$T"
else
  echo "s9_decode9: no compute-sanitizer on PATH"
fi
wait_jobs
echo "tests: $((SECONDS - T0)) s"

# ---- 2. ncu at 16 x 32k, the usual and the head-major cache ----
NCU_M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
for lay in bshd bhsd; do
  nlim=$(left 0 13)
  if command -v ncu >/dev/null && [ "$nlim" -ge 8 ]; then
    vs="$DEF,sdpa_cudnn"; [ $lay = bshd ] && vs="$DEF,$L3,sdpa_cudnn"
    py "$nlim" ncu --cache-control none --clock-control none \
      --kernel-name regex:'attn_decode|sdpa|fmha|flash|cudnn|xmma|fprop' --csv --page raw \
      --metrics "$NCU_M" python3 bench/gpu/bench_decode.py --lib "$LIB" --ncu-drive \
      --shapes 16x32768 --heads 32/8 --kv-layout $lay --variants "$vs" \
      >"$OUT/ncu_$lay.csv" 2>"$OUT/ncu_$lay.err"
    echo "ncu $lay: rc $?, $((SECONDS - T0)) s"
  else
    echo "s9_decode9: ncu $lay skipped (ncu: $(command -v ncu || echo none), $nlim s left)"
  fi
done

# ---- 3. the issue's grid ----
py "$(left 20 46)" python3 bench/gpu/bench_decode.py --lib "$LIB" --batches 1,4,16,64 \
  --ctx 4096,32768,131072 --heads 32/8,16/8 --pages 16 --variants "$DEF" --rep-ms "$REP" \
  --out "$OUT/grid.json" >"$OUT/grid.log" 2>&1
brc=$?
echo "grid bench: rc $brc, $((SECONDS - T0)) s"
[ $brc -ne 0 ] && grep -vE '^\|' "$OUT/grid.log" | tail -6

# ---- 4. head-major caches ----
py "$(left 6 12)" python3 bench/gpu/bench_decode.py --lib "$LIB" --kv-layout bhsd \
  --shapes 16x32768,64x32768,4x131072,16x131072 --heads 32/8 --variants "$DEF" --rep-ms "$REP" \
  --out "$OUT/bhsd.json" >"$OUT/bhsd.log" 2>&1
echo "head-major bench: rc $?, $((SECONDS - T0)) s"

# ---- 5. split sweep at large B ----
slim=$((118 - (SECONDS - T0)))
if [ "$slim" -ge 5 ]; then
  py "$slim" python3 bench/gpu/bench_decode.py --lib "$LIB" --shapes 16x32768,64x32768,16x131072 \
    --heads 32/8 --pages "" --variants "$DEF" --sweep 2,3,4,6 --sweep-variants "$DEF" \
    --sweep-batches 16,64 --rep-ms "$REP" --out "$OUT/sweep.json" >"$OUT/sweep.log" 2>&1
  echo "sweep: rc $?, $((SECONDS - T0)) s"
else
  echo "s9_decode9: sweep skipped ($slim s left)"
fi

echo
echo "== s9_decode9 ($((SECONDS - T0)) s; lean3 forced in the tests)"
jobs_summary
echo "FAILED CASE lines: $(cat "$OUT"/*.log 2>/dev/null | grep -c 'FAILED CASE')"
cat "$OUT"/*.log 2>/dev/null | grep -h 'FAILED CASE' | sort | uniq | head -4 | cut -c1-600
grep -hE 'WRONG|^device|^copy' "$OUT/grid.log" "$OUT/bhsd.log" "$OUT/sweep.log" 2>/dev/null | sort | uniq
python3 bench/gpu/decode9_table.py "$OUT"
jobs_failed && exit 1
exit $brc
