#!/usr/bin/env bash
# bench/gpu/s9_decode9.sh BUILD_DIR — helper decode9 (issue 13), budget 120 s hard on the H200
# (every step under its own timeout, cut to what is left of 118 s): why the split kernel streams
# K + V at ~91% of DRAM at large B (4..64 x 32k..128k) where SDPA cuDNN reaches ~96%, and one
# candidate fix, opt-in:
#   headw  FLASHC_DECODE_KERNEL=headw: the lean loader, 3 stages a warp, a block of 4 warps owns 4
#          consecutive KV heads (a warp each, every key block of the split), so a block's reads
#          of a key are one contiguous 1 KB run of the (B, ctx, Hkv, d) cache instead of one
#          head's 256 bytes at a 2 KB stride (where Sq * group <= 16 and Hkv % 4 == 0; else lean).
#  1. (<= 40 s, side by side) serving_hw: tests/test_cuda_serving at full size, every test on
#     headw (the kernel-variant test on headw and lean3); memcheck_hw: compute-sanitizer memcheck
#     of the short test_kvcache_* cases on headw.
#  2. (<= 12 s, if ncu is on PATH) Nsight Compute at 16 x 32k (Hq 32 / Hkv 8, d 128, bf16), 3 calls
#     each after triton's 256 MB zero_, --cache-control none: the defaults, headw, SDPA cuDNN's
#     kernels: time, DRAM read, DRAM %, warps active a launch.
#  3. (<= 32 s) bench/gpu/bench_decode.py on the issue's grid: B {1,4,16,64} x ctx {4k,32k,128k},
#     Hq/Hkv 32/8 and 16/8, d 128, bf16, the defaults (lean + fill + auto) contiguous and page 16
#     (each checked against SDPA first), against SDPA flash / cuDNN in the same process.
#  4. (<= 16 s) headw + fill + auto and lean3 + fill + auto (headw's warps, stages and shared
#     memory with lean's access pattern: headw / lean3 is the pattern's effect alone) against the
#     defaults, same process, at 4x32k, 16x32k, 64x32k, 16x128k, 32/8 and 16/8, contiguous and
#     page 16.
#  5. (<= 8 s) head-major caches ((B, Hkv, ctx, d) buffers seen as (B, ctx, Hkv, d); contiguous),
#     32/8 at 16x32k and 64x32k: flashc's defaults and cuDNN on the same memory.
#  6. (the rest) split sweep of the defaults at 64x32k and 16x128k (3, 4, 6 against the rule's 2
#     and 3): the split count's tail (64 x 32k: 1024 blocks = 2.6 waves of the 396 slots).
#  The decision tables last (bench/gpu/decode9_table.py, from the logs: a run cut by its timeout
#  still counts the shapes it finished).
# Decision rules (for the lead; RESULTS.md, issue 13, decode9):
# - headw: if serving_hw passed and memcheck_hw is 0, and headw >= 1.02x the defaults at 16x32k
#   and 64x32k (contiguous and page 16) and >= 0.99x at 4x32k and 16x128k: the access pattern was
#   the gap; make headw the large-B loader (a dispatch rule: its grid has 4x fewer blocks a split,
#   so at B 1 it is not the choice) in the next round. Below 1.01x: the pattern is not the gap.
# - head-major caches: flashc there >= 1.03x flashc on the usual cache while cuDNN gains < 2%
#   says the same from the layout side (read beside headw's row).
# - sweep: a count >= 1.02x the rule's at 64x32k or 16x128k: a whole-wave split rule for large B.
# BUILD_DIR: a built tree with tests (libflashc.so, tests/test_cuda_serving), e.g. build-final of
# bench/gpu/final_check.sh. Logs in $OUT (default BUILD_DIR/out-decode9).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin decode9 "${1:-}" tests/test_cuda_serving
T=$B/tests/test_cuda_serving
T0=$SECONDS
DEF=lean+fill+auto HW=headw+fill+auto L3=lean3+fill+auto
REP=${FLASHC_DECODE9_REP_MS:-10}
left() { local l=$((118 - (SECONDS - T0))); [ "$l" -lt "$1" ] && l=$1; [ "$l" -gt "$2" ] && l=$2; echo $l; }
py() { PYTHONUNBUFFERED=1 timeout -k 2 "$@"; }
BD=(python3 bench/gpu/bench_decode.py --lib "$LIB" --rep-ms "$REP")

# ---- 1. tests on headw ----
OMP_NUM_THREADS=4 job serving_hw 40 env FLASHC_DECODE_KERNEL=headw FLASHC_TEST_KERNELS=headw,lean3 "$T"
if command -v compute-sanitizer >/dev/null; then
  job memcheck_hw 40 env FLASHC_DECODE_KERNEL=headw FLASHC_TEST_SMALL=1 FLASHC_TEST_KERNELS=headw \
    FLASHC_TEST_FILTER='test_kvcache_*' \
    compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$T"
else
  echo "s9_decode9: no compute-sanitizer on PATH"
fi
wait_jobs
echo "tests: $((SECONDS - T0)) s"

# ---- 2. ncu at 16 x 32k ----
nlim=$(left 0 12)
if command -v ncu >/dev/null && [ "$nlim" -ge 8 ]; then
  py "$nlim" ncu --cache-control none --clock-control none \
    --kernel-name regex:'attn_decode|sdpa|fmha|flash|cudnn|xmma|fprop' --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
    python3 bench/gpu/bench_decode.py --lib "$LIB" --ncu-drive --shapes 16x32768 --heads 32/8 \
    --variants "$DEF,$HW,sdpa_cudnn" >"$OUT/ncu_bshd.csv" 2>"$OUT/ncu_bshd.err"
  echo "ncu: rc $?, $((SECONDS - T0)) s"
else
  echo "s9_decode9: ncu skipped (ncu: $(command -v ncu || echo none), $nlim s left)"
fi

# ---- 3. the issue's grid ----
py "$(left 20 32)" "${BD[@]}" --batches 1,4,16,64 --ctx 4096,32768,131072 --heads 32/8,16/8 --pages 16 \
  --variants "$DEF" --out "$OUT/grid.json" >"$OUT/grid.log" 2>&1
brc=$?
echo "grid bench: rc $brc, $((SECONDS - T0)) s"
[ $brc -ne 0 ] && grep -vE '^\|' "$OUT/grid.log" | tail -6

# ---- 4. headw against the defaults ----
py "$(left 8 16)" "${BD[@]}" --shapes 4x32768,16x32768,64x32768,16x131072 --heads 32/8,16/8 --pages 16 \
  --variants "$DEF,$HW,$L3" --out "$OUT/headw.json" >"$OUT/headw.log" 2>&1
hrc=$?
echo "headw bench: rc $hrc, $((SECONDS - T0)) s"

# ---- 5. head-major caches ----
py "$(left 5 8)" "${BD[@]}" --kv-layout bhsd --shapes 16x32768,64x32768 --heads 32/8 --variants "$DEF" \
  --out "$OUT/bhsd.json" >"$OUT/bhsd.log" 2>&1
echo "head-major bench: rc $?, $((SECONDS - T0)) s"

# ---- 6. split sweep at large B ----
slim=$((118 - (SECONDS - T0)))
if [ "$slim" -ge 5 ]; then
  py "$slim" "${BD[@]}" --shapes 64x32768,16x131072 --heads 32/8 --pages "" --variants "$DEF" \
    --sweep 3,4,6 --sweep-variants "$DEF" --sweep-batches 16,64 --out "$OUT/sweep.json" \
    >"$OUT/sweep.log" 2>&1
  echo "sweep: rc $?, $((SECONDS - T0)) s"
else
  echo "s9_decode9: sweep skipped ($slim s left)"
fi

echo
echo "== s9_decode9 ($((SECONDS - T0)) s; headw forced in the tests)"
jobs_summary
echo "FAILED CASE lines: $(cat "$OUT"/*.log 2>/dev/null | grep -c 'FAILED CASE')"
cat "$OUT"/*.log 2>/dev/null | grep -h 'FAILED CASE' | sort | uniq | head -4 | cut -c1-600
grep -hE 'WRONG|^device|^copy' "$OUT"/{grid,headw,bhsd,sweep}.log 2>/dev/null | sort | uniq
python3 bench/gpu/decode9_table.py "$OUT"
jobs_failed && exit 1
[ $brc -eq 0 ] && exit $hrc
exit $brc
