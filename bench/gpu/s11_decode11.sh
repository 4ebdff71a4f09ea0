#!/usr/bin/env bash
# bench/gpu/s11_decode11.sh BUILD_DIR — helper decode11 (issue 13), budget 150 s on the H200
# (every step under its own timeout, cut to what is left of 147 s; ~140 s expected).
# Questions: (1) does a split rule that makes large grids >= 5 blocks a slot (when each split
# keeps >= 8192 keys; whole waves for large grids of shorter splits) beat the default counts,
# as 4 splits did at 64 x 32k / 128k (+2.5-3.0%, twice)? (2) what closes the ctx 4k gap
# (0.88-0.93x cuDNN): the split count, a merge in the last block, or one block a (b, KV head)
# with 12 warps and no merge? Opt-in variants (src/cuda/attn_decode.cu, read at every call):
#   deep   FLASHC_DECODE_SPLITS=deep: the fewest splits giving >= 5 blocks a slot where each
#          keeps >= 8192 keys (64 x 32k/128k: 4; 32 x 128k: 8; 16 x 128k: 16; 128 x 32k: 2);
#          else fill for small grids and, for large ones, the s in 1..8 (>= 1024 keys) with the
#          fewest ceil(blocks / slots) / s (64 x 4k: 3, 128 x 4k: 3); else as the default
#   wide   FLASHC_DECODE_KERNEL=wide: the lean loader with 12 warps a block (196 KB, one block
#          an SM): at B >= 16 one split, no partials and no merge (cuDNN's grid)
#   fused  FLASHC_DECODE_MERGE=fused (exists since 2026-12-01): the last block of a tile merges
#  1. (<= 40 s, side by side) tests/test_cuda_serving with each variant forced, one job a test:
#     every KV-cache test on wide (contiguous and paged page 1/7/16/64/256 with shuffled
#     tables, ragged lengths, append, GQA 1/4/8, Sq 1..16, chunked prefill, masks, modifiers,
#     splits 1..64 and 150 equal to one pass, graph replays, every merge, bf16 and fp16) and
#     test_kvcache_kernel_variants with FLASHC_TEST_KERNELS=wide; the tests that take the
#     automatic count under deep, and test_kvcache_kernel_variants on lean (fill / fa2 / deep on
#     the rule cases, deep_rule_check's counts at B 64 x 32k and 4k); compute-sanitizer memcheck
#     (decode, splits) and racecheck (decode) of the short cases on wide. Fused is in every
#     test_kvcache_merge_variants job (its default list).
#  2. (<= 55 s, alone) bench_decode.py, 32/8, contiguous, the issue's B 1/4/16/64 x 4k/32k/128k
#     plus 32 x 32k/128k and 128 x 4k/32k: default (auto), deep, wide, fused, SDPA flash and
#     cuDNN in one process; at B 16 / 64 / 128 the split sweep 1, 2, 3, 4, 6, 8, 16 (contiguous)
#  3. (<= 25 s) the same variants at 16/8, contiguous and page 16, at 7 cells
#  4. (the rest, <= 25 s) 32/8 page 16 (with contiguous beside it) at 5 cells
#  5. bench/gpu/decode11_table.py: per cell GB/s, x cuDNN, each variant / default, page 16; the
#     sweep / auto; the verdicts by the rule below; issue 13's targets.
# Decision rule (bench/RESULTS.md, decode11): a variant becomes the default in a region (B x ctx
# named from the plan-time maxima) when its forced tests passed, memcheck / racecheck are clean,
# no bench cell was WRONG, and it is >= 1.02x the default in every cell of that region measured
# (contiguous and page 16, both head ratios) and never < 0.99x in a cell where it would run;
# else it stays opt-in (removed if the next run says the same). For deep the region is the cells
# where its count differs from the default's, split by its two parts (the table prints both).
# BUILD_DIR: a built tree with tests (libflashc.so, tests/test_cuda_serving), e.g. build-final of
# bench/gpu/final_check.sh. $OUT gets 4 files: tests.tgz (every job's log), bench_32x8.log,
# bench_16x8.log, bench_p16.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin decode11 "${1:-}" tests/test_cuda_serving
FINAL=$OUT
OUT=$(mktemp -d "${TMPDIR:-/tmp}/decode11.XXXXXX") # job logs: tarred into $FINAL (few files)
T=$B/tests/test_cuda_serving
T0=$SECONDS
REP=${FLASHC_DECODE11_REP_MS:-10}
left() { echo $((147 - (SECONDS - T0))); }
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

# ---- 1. tests with each variant forced, sanitizers ----
for t in kvcache_decode kvcache_masks kvcache_chunked_prefill kvcache_splits kvcache_long \
  kvcache_graph kvcache_merge_variants varlen dense_modifiers prefill_mods; do
  job "wide_$t" 40 env FLASHC_DECODE_KERNEL=wide FLASHC_TEST_FILTER="test_$t" "$T"
done
job wide_kernel_variants 40 env FLASHC_DECODE_KERNEL=wide FLASHC_TEST_KERNELS=wide \
  FLASHC_TEST_FILTER=test_kvcache_kernel_variants "$T"
for t in kvcache_decode kvcache_splits kvcache_long kvcache_graph kvcache_merge_variants; do
  job "deep_$t" 40 env FLASHC_DECODE_SPLITS=deep FLASHC_TEST_FILTER="test_$t" "$T"
done
job deep_kernel_variants 40 env FLASHC_TEST_KERNELS=lean \
  FLASHC_TEST_FILTER=test_kvcache_kernel_variants "$T"
if command -v compute-sanitizer >/dev/null; then
  for x in memcheck:kvcache_decode memcheck:kvcache_splits racecheck:kvcache_decode; do
    job "${x%%:*}_wide_${x#*:}" 40 env FLASHC_DECODE_KERNEL=wide FLASHC_TEST_SMALL=1 \
      FLASHC_TEST_FILTER="test_${x#*:}" \
      compute-sanitizer --tool "${x%%:*}" --report-api-errors no --error-exitcode 9 "$T"
  done
else
  echo "s11_decode11: no compute-sanitizer on PATH: memcheck / racecheck not run"
fi
wait_jobs
summary=$(jobs_summary)
tests_ok=1
jobs_failed && tests_ok=0
echo "s11_decode11: tests took $((SECONDS - T0)) s"

# ---- 2.-4. the bench, alone on the GPU; the cells that decide first ----
V=auto,deep,wide,fused
S32=64x32768,64x131072,64x4096,16x4096,16x131072,16x32768,1x4096,4x4096,1x32768,4x32768
S32+=,1x131072,4x131072,32x131072,32x32768,128x32768,128x4096
bench bench_32x8 55 --heads 32/8 --pages "" --variants "$V" --shapes "$S32" \
  --sweep 1,2,3,4,6,8,16 --sweep-variants auto --sweep-batches 16,64,128
bench bench_16x8 25 --heads 16/8 --pages 16 --variants "$V" \
  --shapes 64x32768,64x4096,16x4096,16x131072,64x131072,1x32768,4x4096
bench bench_p16 25 --heads 32/8 --pages 16 --variants auto,deep,wide \
  --shapes 64x32768,64x4096,16x4096,16x131072,1x32768

# ---- 5. what the lead reads ----
tar czf "$FINAL/tests.tgz" -C "$OUT" . 2>/dev/null
echo
echo "== s11_decode11 ($((SECONDS - T0)) s); tests: the variant forced as the job's name says"
echo "$summary"
echo "FAILED CASE lines: $(cat "$OUT"/*.log 2>/dev/null | grep -c 'FAILED CASE')"
cat "$OUT"/*.log 2>/dev/null | grep -h 'FAILED CASE' | sort | uniq | head -4 | cut -c1-600
grep -h 'deep at B 64' "$OUT"/deep_kernel_variants.log 2>/dev/null | head -2
grep -hE 'WRONG|^device|^copy|Traceback|Error' "$FINAL"/bench_*.log 2>/dev/null | sort | uniq |
  head -12 | cut -c1-240
python3 bench/gpu/decode11_table.py "$tests_ok" "$FINAL"/bench_32x8.log "$FINAL"/bench_16x8.log \
  "$FINAL"/bench_p16.log
rm -rf "$OUT"
[ "$tests_ok" = 1 ] || exit 1
exit 0
