#!/usr/bin/env bash
# bench/gpu/s10_decode10.sh BUILD_DIR — helper decode10 (issue 13), budget 100 s hard on the H200
# (every step under its own timeout, cut to what is left of 97 s).
# Question: does the split kernel stream K + V faster with its key rows moved by the copy engine
# (cp.async.bulk a row, mbarrier stages) than with lean's cp.async, and does a split rule that
# stops splitting where it does not shorten the last wave help at large B? Opt-in variants
# (src/cuda/attn_decode.cu, read at every call):
#   tma   FLASHC_DECODE_KERNEL=tma: 3 stages a warp, unswizzled tiles with 16-byte row padding,
#         106 KB a block at d 128 (2 blocks a SM, 136 KB in flight a SM against lean's 96 KB)
#   tma4  FLASHC_DECODE_KERNEL=tma4: 4 stages, 140 KB, one block a SM
#   ceil  FLASHC_DECODE_SPLITS=ceil: fill for small grids; for larger ones the split count with
#         the fewest tile-times of whole waves, the smallest on a tie (64 x 32k under tma: 1)
#  1. (<= 40 s, side by side) tests/test_cuda_serving with the loader forced, one job a test:
#     every test that reaches the KV-cache kernel on tma; decode, splits and long on tma4;
#     test_kvcache_kernel_variants with FLASHC_TEST_KERNELS=tma and =tma4 (contiguous and paged
#     page 1/7/16/64/256 with shuffled tables, GQA 1..8, B 1..64, ragged odd lengths, caches of
#     0 / 1 key, LSE, splits 1..64 and auto under fill, fa2 and ceil); plus compute-sanitizer
#     memcheck and racecheck of the short test_kvcache_decode on tma.
#  2. (<= 40 s) bench/gpu/bench_decode.py, 32/8, d 128, bf16, B 1/4/16/64 x ctx 32k/128k,
#     contiguous and page 16: the defaults (lean + fill + auto), tma + fill, tma4 + fill,
#     lean + ceil and SDPA flash / cuDNN in one process (at these shapes ceil's counts for tma
#     are fill's: 1 split at B 64 (fill's FA2 branch), so tma + ceil would repeat tma + fill;
#     lean + ceil is 3 splits at 64 x 4k / 32k / 128k against fill's 2); plus explicit splits
#     2 and 4 at B 64 for tma and lean (decode9's lead: 4 splits at 64 x 32k +2.7% on lean).
#  3. (the rest, <= 18 s) the same at ctx 4k, without the sweep.
#  4. the decision table last (bench/gpu/decode10_table.py; rule below).
# Decision rule (RESULTS.md, issue 13, decode10): a variant becomes the default where its forced
# tests passed, memcheck / racecheck are clean, no bench cell was WRONG, and it is >= 1.02x the
# current default: everywhere (geomean >= 1.02, no cell < 0.98: "DEFAULT") or, through a dispatch
# rule, in a whole region (a B or ctx range) of cells >= 1.02x; else it stays opt-in (removal
# after a second run says the same).
# BUILD_DIR: a built tree with tests (libflashc.so, tests/test_cuda_serving), e.g. build-final of
# bench/gpu/final_check.sh. Logs in $OUT (default BUILD_DIR/out-decode10).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin decode10 "${1:-}" tests/test_cuda_serving
T=$B/tests/test_cuda_serving
T0=$SECONDS
DEF=lean+fill+auto
VARS="$DEF,tma+fill+auto,tma4+fill+auto,lean+ceil+auto"
REP=${FLASHC_DECODE10_REP_MS:-10}
left() { local l=$((97 - (SECONDS - T0))); [ "$l" -lt "$1" ] && l=$1; [ "$l" -gt "$2" ] && l=$2; echo $l; }
BD=(env PYTHONUNBUFFERED=1 python3 bench/gpu/bench_decode.py --lib "$LIB" --rep-ms "$REP" --heads 32/8)

# ---- 1. tests with the loader forced, sanitizers ----
for t in kvcache_decode kvcache_masks kvcache_chunked_prefill kvcache_splits kvcache_long \
  kvcache_graph kvcache_merge_variants varlen dense_modifiers prefill_mods; do
  job "tma_$t" 40 env FLASHC_DECODE_KERNEL=tma FLASHC_TEST_FILTER="test_$t" "$T"
done
for t in kvcache_decode kvcache_splits kvcache_long; do
  job "tma4_$t" 40 env FLASHC_DECODE_KERNEL=tma4 FLASHC_TEST_FILTER="test_$t" "$T"
done
for k in tma tma4; do # the variant cases, B 64, ctx <= 1, the split rules (fill, fa2, ceil)
  job "${k}_kernel_variants" 40 env FLASHC_DECODE_KERNEL=$k FLASHC_TEST_KERNELS=$k \
    FLASHC_TEST_FILTER=test_kvcache_kernel_variants "$T"
done
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    job "${tool}_tma" 40 env FLASHC_DECODE_KERNEL=tma FLASHC_TEST_SMALL=1 \
      FLASHC_TEST_FILTER=test_kvcache_decode \
      compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 9 "$T"
  done
else
  echo "s10_decode10: no compute-sanitizer on PATH: memcheck / racecheck not run"
fi
wait_jobs
summary=$(jobs_summary)
tests_ok=1
jobs_failed && tests_ok=0
echo "s10_decode10: tests took $((SECONDS - T0)) s"

# ---- 2. bench at ctx 32k and 128k (the targets' cells), with tma's split sweep at B 64 ----
timeout -k 2 "$(left 10 40)" "${BD[@]}" --batches 1,4,16,64 --ctx 32768,131072 --pages 16 \
  --variants "$VARS" --sweep 2,4 --sweep-variants tma+auto,lean+auto --sweep-batches 64 \
  --out "$OUT/long.json" >"$OUT/long.log" 2>&1
lrc=$?
echo "bench 32k/128k: rc $lrc$([ $lrc = 124 ] && echo ' (timed out)'), $((SECONDS - T0)) s"

# ---- 3. bench at ctx 4k ----
timeout -k 2 "$(left 8 18)" "${BD[@]}" --batches 1,4,16,64 --ctx 4096 --pages 16 \
  --variants "$VARS" --out "$OUT/short.json" >"$OUT/short.log" 2>&1
src=$?
echo "bench 4k: rc $src$([ $src = 124 ] && echo ' (timed out)'), $((SECONDS - T0)) s"

# ---- 4. what the lead reads ----
echo
echo "== s10_decode10 ($((SECONDS - T0)) s); tests: FLASHC_DECODE_KERNEL forced as the job's name"
echo "$summary"
echo "FAILED CASE lines: $(cat "$OUT"/*.log 2>/dev/null | grep -c 'FAILED CASE')"
cat "$OUT"/*.log 2>/dev/null | grep -h 'FAILED CASE' | sort | uniq | head -4 | cut -c1-600
grep -hE 'WRONG|^device|^copy|Traceback|Error' "$OUT"/{long,short}.log 2>/dev/null | sort | uniq |
  head -12 | cut -c1-240
python3 bench/gpu/decode10_table.py "$tests_ok" "$OUT/long.json" "$OUT/short.json"
[ "$tests_ok" = 1 ] || exit 1
[ $lrc -eq 0 ] && exit $src
exit $lrc
