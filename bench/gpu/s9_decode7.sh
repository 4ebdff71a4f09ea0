#!/usr/bin/env bash
# bench/gpu/s9_decode7.sh BUILD_DIR — helper decode7 (issue 13), budget 80 s hard on the H200
# (every step under its own timeout, the last one cut at 79 s): the B = 1 x 32k split kernel's
# ramp and the merge's tail, two opt-in variants against the defaults (lean + fill + auto, auto
# = merge v4 at small grids since main 19f6be8):
#   leanpf  FLASHC_DECODE_KERNEL=leanpf: lean, plus L2 prefetches of each warp's first 2 blocks
#           (K and V) issued before the block's first dependent load (cache_seqlens), so DRAM
#           starts streaming one latency earlier (contiguous and paged caches);
#   v5      FLASHC_DECODE_MERGE=v5: v4 with cache_seqlens read before griddepcontrol.wait (one
#           dependent L2 round trip fewer after the split grid; v3's bits, the test checks).
#  1. (<= 44 s, three jobs side by side, both forced):
#     serving_pf  tests/test_cuda_serving at full size, every test on leanpf + v5 (the
#                 kernel-variant test on leanpf: FLASHC_TEST_KERNELS; the merge test on v5, v4,
#                 pdl: FLASHC_TEST_MERGES; v4 and v5 = v3 bit for bit in every run);
#     memcheck_pf compute-sanitizer memcheck, short test_kvcache_* on leanpf, merges v5, v4;
#     racecheck_pf compute-sanitizer racecheck, the short merge-variant test on leanpf (v5, pdl).
#  2. (<= 12 s, if ncu is on PATH) Nsight Compute at 1 x 32k (Hq 32 / Hkv 8, d 128, bf16), three
#     calls each after triton's 256 MB zero_, --cache-control none: lean+fill+v4 (= the
#     defaults), leanpf+fill+v5, and lean+fill+v4 at 49 splits (3 blocks a SM, 12 warps: the
#     "more resident warps" question without the merge's share): time, DRAM read / written, %.
#  3. (until 71 s, >= 18 s) bench/gpu/bench_decode.py: leanpf+fill+v5, leanpf+fill+auto,
#     lean+fill+v5 and lean+fill+auto (the defaults) against SDPA flash / cuDNN at 1x4k, 1x32k,
#     4x32k, 16x32k, 64x32k, 1x128k, contiguous and page 16 (each checked against SDPA first), a
#     split sweep at B 1 (16, 33, 49) of leanpf+fill+v5 and the defaults, and the clean-flush
#     comparison at 1x32k.
#  4. (the rest, until 79 s, if >= 5 s are left) bench_decode.py --short-len: B 1 with a cache
#     longer than its sequence (capacity 32k holding 4k keys, 128k holding 32k): leanpf's
#     prefetches are predicted from the capacity (the device-side lengths' Sk) and mostly miss; lean+fill+auto,
#     leanpf+fill+auto, leanpf+fill+v5, each against SDPA and bit for bit against lean's o.
#  The short tables last.
# Decision rules (for the lead), all needing serving_pf passed and memcheck_pf / racecheck_pf 0:
# - v5 replaces v4 in auto if lean+fill+v5 >= 1.005x lean+fill+auto at 1x4k and 1x32k and not
#   below 0.99x at 4x32k (same bits, so any gain is free; below 0.5% it is noise: keep v4).
# - leanpf becomes the default loader if leanpf+fill+auto >= 1.02x lean+fill+auto at 1x32k (or
#   1x4k) and >= 0.99x at every other shape and layout (contiguous and page 16), and >= 0.99x
#   lean in the capacity > length table (its mispredicted prefetches: up to 17 MB at B 1), every
#   cell there without WRONG or DIFFERS.
# - ncu: if the split kernel at s49 is faster than at s33 (time), more warps per SM do help and
#   the merge's cost is what made s49 lose in round A; if not, the B = 1 limit is not the warp
#   count (record it in RESULTS.md, issue 13, decode7).
# BUILD_DIR: a built tree with tests (libflashc.so, tests/test_cuda_serving), e.g. build-final of
# bench/gpu/final_check.sh. Logs in $OUT (default BUILD_DIR/out-decode7).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin decode7 "${1:-}" tests/test_cuda_serving
T=$B/tests/test_cuda_serving
T0=$SECONDS
NEW=leanpf+fill+v5 PF=leanpf+fill+auto V5=lean+fill+v5 OLD=lean+fill+auto

# ---- 1. tests on leanpf + v5 ----
OMP_NUM_THREADS=4 job serving_pf 44 env FLASHC_DECODE_KERNEL=leanpf FLASHC_DECODE_MERGE=v5 \
  FLASHC_TEST_KERNELS=leanpf FLASHC_TEST_MERGES=v5,v4,pdl "$T"
if command -v compute-sanitizer >/dev/null; then
  job memcheck_pf 44 env FLASHC_DECODE_KERNEL=leanpf FLASHC_TEST_SMALL=1 FLASHC_TEST_KERNELS=leanpf \
    FLASHC_TEST_MERGES=v5,v4 FLASHC_TEST_FILTER='test_kvcache_*' \
    compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$T"
  job racecheck_pf 44 env FLASHC_DECODE_KERNEL=leanpf FLASHC_TEST_SMALL=1 FLASHC_TEST_MERGES=v5,pdl \
    FLASHC_TEST_FILTER=test_kvcache_merge_variants \
    compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 "$T"
else
  echo "s9_decode7: no compute-sanitizer on PATH"
fi
wait_jobs
echo "tests: $((SECONDS - T0)) s"

# ---- 2. ncu at 1 x 32k under the bench's dirty L2 ----
nlim=$((12 < 58 - (SECONDS - T0) ? 12 : 58 - (SECONDS - T0)))
if command -v ncu >/dev/null && [ "$nlim" -ge 8 ]; then
  PYTHONUNBUFFERED=1 timeout -k 2 "$nlim" ncu --cache-control none --clock-control none \
    --kernel-name regex:attn_decode --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    python3 bench/gpu/bench_decode.py --lib "$LIB" --ncu-drive --shapes 1x32768 --heads 32/8 \
    --variants "lean+fill+v4,$NEW,lean+fill+v4/s49" >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  echo "ncu: rc $?, $((SECONDS - T0)) s"
else
  echo "s9_decode7: ncu skipped (on PATH: $(command -v ncu || echo no), $nlim s left for it)"
fi

# ---- 3. the bench (the GPU to itself) ----
lim=$((71 - (SECONDS - T0)))
[ "$lim" -lt 18 ] && lim=18
PYTHONUNBUFFERED=1 timeout -k 2 "$lim" python3 bench/gpu/bench_decode.py --lib "$LIB" \
  --shapes 1x4096,1x32768,4x32768,16x32768,64x32768,1x131072 --heads 32/8 --pages 16 \
  --variants "$NEW,$PF,$V5,$OLD" --sweep 16,33,49 --sweep-variants "$NEW,$OLD" --sweep-batches 1 \
  --clean-shapes 1x32768 --rep-ms "${FLASHC_DECODE7_REP_MS:-10}" \
  --out "$OUT/s9_decode7.json" >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s9_decode7: bench TIMED OUT after $lim s (partial log: $OUT/bench.log)"
[ $brc -ne 0 ] && { echo "s9_decode7: bench rc $brc"; grep -vE '^\|' "$OUT/bench.log" | tail -8; }

# ---- 4. a cache longer than its sequence (leanpf's mispredicted prefetches) ----
slim=$((79 - (SECONDS - T0)))
if [ "$slim" -ge 5 ]; then
  PYTHONUNBUFFERED=1 timeout -k 1 "$slim" python3 bench/gpu/bench_decode.py --lib "$LIB" \
    --heads 32/8 --short-len 32768:4096,131072:32768 --variants "$OLD,$PF,$NEW" \
    --rep-ms "${FLASHC_DECODE7_REP_MS:-10}" >"$OUT/short.log" 2>&1
  echo "short-len: rc $?, $((SECONDS - T0)) s"
else
  echo "s9_decode7: short-len skipped ($slim s left)" | tee "$OUT/short.log"
fi

echo
echo "== s9_decode7 (leanpf and v5 forced in the tests; $((SECONDS - T0)) s)"
jobs_summary
echo "FAILED CASE lines (all jobs): $(cat "$OUT"/*.log 2>/dev/null | grep -c 'FAILED CASE')"
cat "$OUT"/*.log 2>/dev/null | grep -h 'FAILED CASE' | sort | uniq | head -6 | cut -c1-700
echo "v4/v5 = v3 bit-for-bit lines: $(grep -hc 'v[45] = v3 bit for bit' "$OUT/serving_pf.log" 2>/dev/null)"
if [ -s "$OUT/ncu.csv" ]; then
  echo
  echo "ncu, 1 x 32k, dirty L2 (--cache-control none after a 256 MB zero_), per kernel launch:"
  grep -hE 'ncu-drive|ERR' "$OUT/ncu.csv" "$OUT/ncu.err" | sort | uniq -c | head -6
  python3 - "$OUT/ncu.csv" <<'PY'
import csv, re, sys
rd = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
if len(rd) < 3:
    print("  (no ncu rows)")
    sys.exit(0)
h, units = rd[0], rd[1]
ix = {k: i for i, k in enumerate(h)}
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "byte": 1e-6, "Kbyte": 1e-3,
         "Mbyte": 1.0, "Gbyte": 1e3, "%": 1.0}
def g(r, k):  # us for times, MB for bytes
    try:
        return float(r[ix[k]].replace(",", "")) * scale.get(units[ix[k]], 1.0)
    except (KeyError, ValueError, IndexError):
        return float("nan")
print("| # | kernel | grid | time us | DRAM read MB | DRAM write MB | DRAM % |")
print("|--:|---|---|--:|--:|--:|--:|")
n = 0
for r in rd[2:]:
    if not r[0].strip().isdigit():
        continue
    n += 1
    m = re.search(r"(attn_decode_\w+)(<[^()]*>)?", r[ix["Kernel Name"]])
    short = (m.group(1) + (m.group(2) or "")).replace("__nv_bfloat16", "bf16") if m else r[ix["Kernel Name"]][:40]
    print(f"| {n} | {short} | {r[ix['Grid Size']] if 'Grid Size' in ix else '?'} | "
          f"{g(r, 'gpu__time_duration.sum'):.1f} | {g(r, 'dram__bytes_read.sum'):.1f} | "
          f"{g(r, 'dram__bytes_write.sum'):.1f} | "
          f"{g(r, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'):.0f} |")
print("(6 launches a variant, 3 calls x (split kernel, merge3): 1-6 lean+fill+v4, 7-12 "
      "leanpf+fill+v5, 13-18 lean+fill+v4 at 49 splits; split kernel's last template argument "
      "1 lean, 6 leanpf; merge3<.., 1> v4, <.., 2> v5)")
PY
fi
echo
grep -hE 'WRONG|^device|^copy' "$OUT/bench.log"
echo "decision rules: v5 -> auto's merge if lean+fill+v5 >= 1.005x lean+fill+auto at 1x4k and"
echo "  1x32k and >= 0.99x at 4x32k; leanpf -> default loader if leanpf+fill+auto >= 1.02x"
echo "  lean+fill+auto at 1x32k (or 1x4k), >= 0.99x at every other shape and layout and in the"
echo "  capacity > length table (no WRONG / DIFFERS there); both only with serving_pf passed and"
echo "  memcheck_pf / racecheck_pf at 0."
sed -n '/^merge variants/,$p' "$OUT/bench.log"
echo
grep -vE '^\s*$' "$OUT/short.log" | tail -8
jobs_failed && exit 1
exit $brc
