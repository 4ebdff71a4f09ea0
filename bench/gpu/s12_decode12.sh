#!/usr/bin/env bash
# bench/gpu/s12_decode12.sh BUILD_DIR — helper decode12 (issue 13), budget 180 s on the H200
# (every step under its own timeout, cut to what is left of 175 s; ~165 s expected).
# Question: does the fused merge with its partials staged in shared memory (fused2) remove the
# merge's share of small-batch long-context decode? At B 1 x 32k the call is ~51 us, the merge
# kernel 4.4 us of it in ncu (decode6 / decode7); the fused merge that exists (the tile's last
# block merges, no merge launch, no wait for the whole split grid) lost 0.91-1.04x (decode4,
# decode11) because its one block of 4 warps sums the partials from L2 in ceil(splits / 8)
# dependent batches (33 splits: 5 + the LSEs' one), where v4's 128 blocks wait on one each.
# Opt-in variants (src/cuda/attn_decode.cu, read at every call):
#   fused2  FLASHC_DECODE_MERGE=fused2: fused whose last block copies every split's partials of
#           its tile into shared memory with cp.async (33 splits x 4 rows x Dv 128 = 66 KB of
#           lean's 68 KB) beside the LSE loads: one L2 round trip (one more a further batch)
#   fused   FLASHC_DECODE_MERGE=fused (since 2026-12-01): the reference of the cause above
#  1. (<= 50 s, side by side) tests/test_cuda_serving with fused2 forced on every KV-cache test
#     (contiguous and paged page 1/7/16/64/256 with shuffled tables, ragged cache_seqlens with 0
#     and 1 key, append, GQA 1/2/4/8, Sq 1..16, chunked prefill, masks, softcap, ALiBi, D 40..256,
#     Dk != Dv, splits 1..64 equal to one pass, the automatic count at 32k, graph replays, varlen,
#     dense modifiers), test_kvcache_merge_variants on fused2 and fused (a new 40-split case: two
#     staged batches with empty splits), test_kvcache_kernel_variants with fused2 forced on the
#     lean (with the split rules and deep_rule_check at B 64), base and lean5 loaders, a job
#     each; compute-sanitizer memcheck (merge variants, splits) and racecheck (merge variants)
#     of the short cases on fused2.
#  2. (<= 75 s, alone) bench_decode.py 32/8, contiguous and page 16: auto (the default), fused2,
#     fused, SDPA flash / cuDNN in one process at B 1, 4 x 32k, 128k, 4k and B 16, 64 x 32k, 128k;
#     a split sweep at B 1 (33, 49: a third block a SM may pay once the merge is cheap) for auto
#     and fused2; the clean-flush comparison at 1 x 32k; the ratio table to auto last.
#  3. (the rest, <= 35 s) the same at 16/8, contiguous and page 16, B 1 / 4 x 32k / 128k, 16 x 32k.
# Decision rule (bench/RESULTS.md, decode12): with every forced job passed, memcheck 0 errors,
# racecheck 0 hazards and no WRONG cell, fused2 becomes auto's merge where auto now takes v4
# (merge grids <= 4 blocks a SM: B <= 4 at 32 query heads) if fused2 / auto >= 1.02 at 1 x 32k
# (contiguous and page 16, both head ratios) and every B 1-4 cell at ctx >= 32k is >= 0.99;
# it also replaces pdl at B >= 16 only if every such cell there is >= 1.01. If fused2 / auto <
# 1.0 at B 1 x 32k, fused2 is removed, and with it fused (then three runs below auto).
# BUILD_DIR: a built tree with tests (libflashc.so, tests/test_cuda_serving), e.g. build-final of
# bench/gpu/final_check.sh. $OUT gets 3 files: tests.tgz (every job's log), bench_32x8.log,
# bench_16x8.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin decode12 "${1:-}" tests/test_cuda_serving
FINAL=$OUT
OUT=$(mktemp -d "${TMPDIR:-/tmp}/decode12.XXXXXX") # job logs: tarred into $FINAL (few files)
T=$B/tests/test_cuda_serving
T0=$SECONDS
REP=${FLASHC_DECODE12_REP_MS:-10}
left() { echo $((175 - (SECONDS - T0))); }
BD=(env PYTHONUNBUFFERED=1 python3 bench/gpu/bench_decode.py --lib "$LIB" --rep-ms "$REP")
# bench NAME CAP ARG...: bench_decode.py under min(CAP, time left) seconds (skipped under 8),
# its log in $FINAL/NAME.log
bench() {
  local n=$1 t=$2 rc
  shift 2
  [ "$(left)" -lt "$t" ] && t=$(left)
  if [ "$t" -lt 8 ]; then
    echo "$n: skipped (no time left)"
    return
  fi
  timeout -k 2 "$t" "${BD[@]}" "$@" --out "$OUT/$n.json" >"$FINAL/$n.log" 2>&1
  rc=$?
  echo "$n: rc $rc$([ $rc = 124 ] && echo " (timed out at $t s: finished shapes count)")," \
    "+$((SECONDS - T0)) s"
}

# ---- 1. tests with fused2 forced, sanitizers ----
for t in kvcache_decode kvcache_masks kvcache_chunked_prefill kvcache_splits kvcache_long \
  kvcache_graph varlen dense_modifiers; do
  job "fused2_$t" 50 env FLASHC_DECODE_MERGE=fused2 FLASHC_TEST_FILTER="test_$t" "$T"
done
job fused2_merge_variants 50 env FLASHC_TEST_MERGES=fused2,fused \
  FLASHC_TEST_FILTER=test_kvcache_merge_variants "$T"
for k in lean base lean5; do # lean: the split rules and deep_rule_check (B 64 x 32k / 4k)
  job "fused2_kernel_variants_$k" 50 env FLASHC_DECODE_MERGE=fused2 FLASHC_TEST_KERNELS=$k \
    FLASHC_TEST_FILTER=test_kvcache_kernel_variants "$T"
done
if command -v compute-sanitizer >/dev/null; then
  for x in memcheck:kvcache_merge_variants memcheck:kvcache_splits \
    racecheck:kvcache_merge_variants; do
    job "${x%%:*}_fused2_${x#*:}" 50 env FLASHC_DECODE_MERGE=fused2 FLASHC_TEST_MERGES=fused2 \
      FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER="test_${x#*:}" \
      compute-sanitizer --tool "${x%%:*}" --report-api-errors no --error-exitcode 9 "$T"
  done
else
  echo "s12_decode12: no compute-sanitizer on PATH: memcheck / racecheck not run"
fi
wait_jobs
summary=$(jobs_summary)
tests_ok=1
jobs_failed && tests_ok=0
echo "s12_decode12: tests took $((SECONDS - T0)) s"

# ---- 2.-3. the bench, alone on the GPU; the cells that decide first ----
V=auto,fused2,fused
bench bench_32x8 75 --heads 32/8 --pages 16 --variants "$V" --ratio-to auto \
  --shapes 1x32768,4x32768,1x131072,4x131072,16x32768,64x32768,16x131072,64x131072,1x4096,4x4096 \
  --sweep 33,49 --sweep-variants auto,fused2 --sweep-batches 1 --clean-shapes 1x32768
bench bench_16x8 35 --heads 16/8 --pages 16 --variants auto,fused2 --ratio-to auto \
  --shapes 1x32768,4x32768,1x131072,4x131072,16x32768

# ---- what the lead reads ----
tar czf "$FINAL/tests.tgz" -C "$OUT" . 2>/dev/null
echo
echo "== s12_decode12 ($((SECONDS - T0)) s); tests: fused2 forced as the job's name says"
echo "$summary"
echo "FAILED CASE lines: $(cat "$OUT"/*.log 2>/dev/null | grep -c 'FAILED CASE')"
cat "$OUT"/*.log 2>/dev/null | grep -h 'FAILED CASE' | sort | uniq | head -4 | cut -c1-600
grep -hE 'WRONG|^device|^copy|Traceback|Error' "$FINAL"/bench_*.log 2>/dev/null | sort | uniq |
  head -12 | cut -c1-240
for f in "$FINAL"/bench_32x8.log "$FINAL"/bench_16x8.log; do
  [ -e "$f" ] || continue
  echo
  echo "-- $(basename "$f"): split sweep, clean flush and the ratio table (the deciding one)"
  if grep -q '^ratios to' "$f"; then
    sed -n '/^split sweep/,$p' "$f" | grep -v '^$' | head -60
    grep -q '^split sweep' "$f" || sed -n '/^ratios to/,$p' "$f" | head -40
  else # cut short: the finished shapes' lines (GB/s, sN = splits used)
    grep -E '^Hq/Hkv' "$f" | cut -c1-400
  fi
done
rm -rf "$OUT"
[ "$tests_ok" = 1 ] || exit 1
exit 0
