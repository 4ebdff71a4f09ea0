#!/usr/bin/env bash
# bench/gpu/s9_bwd10.sh BUILD_DIR — helper bwd10 (issue 12), budget 110 s on the H200 (hard
# timeouts: tests 40 s, bwd_pre.py 25 s, bwd_which.py 15 s, the bench the rest up to 105 s).
# Question: the backward's preprocess (D = rowsum(dO * O), attn_bwd_pre_kernel in
# src/cuda/attn_bwd_common.cuh) now runs 2 rows a warp at d <= 64 (every family, the default),
# all loads of both rows before the sums, per-row arithmetic unchanged; FLASHC_CUDA_BWD_PRE=r1
# gives the old shape (1 row a warp) for the A/B. The 2026-12-04 profile: 115 us at 45% DRAM at
# d 64 4k against 69 us at 75% at d 128 (same bytes); cuDNN's dot_do_o 70 us.
#  1. tests (all at once): test_cuda_attn_bwd's d 64 suites, deterministic bitwise, strided +
#     stream + workspace, modifiers under the default (new shape) and, for the odd tails, the
#     sm80 family's d 64 suite (forced; its SPLIT template and turn counters); compute-sanitizer
#     memcheck of the short d 64 cases (a half-full last warp reads nothing out of bounds);
#  2. bench/gpu/bwd_pre.py: D, dQ, dK, dV bitwise equal under r1 and the new shape
#     (deterministic mode; 6 shapes, odd row counts too), then the preprocess's device time
#     (torch.profiler, median of 20 calls) old vs new at d 64 (B4 H32) and d 128 (B4 H16) 4k,
#     bf16 non-causal, and the whole backward's kernel time a call;
#  3. bench/gpu/bench_bwd4.py, d 64 and d 128, S 1k / 2k / 4k / 16k (B*S = 16k, hidden 2048),
#     causal and not: the default (new preprocess) fast + deterministic vs SDPA flash and cuDNN
#     (context for RESULTS.md; compare with s9_bwd8's run of the same cells).
# Decision: keep the new shape as the default (already committed as such) if every job passed,
# every "pre bits" line says IDENTICAL, and "pre time" shows new <= r1 at d 64; if new is
# slower at d 64, set bwd_pre_rows<D>::R to 1 (the old shape, bit for bit).
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. Logs in
# $OUT (default BUILD_DIR/out-bwd10).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd10 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
PY=(env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1)

# ---- 1. tests and sanitizer (<= 40 s wall, all jobs at once) ----
if command -v compute-sanitizer >/dev/null; then
  job mc-bf16_d64 38 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_bf16_d64 \
    compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$TEST"
else
  echo "s9_bwd10: no compute-sanitizer on PATH: memcheck not run"
fi
for s in bf16_d64 f16_d64; do
  job "pre-$s" 38 env FLASHC_TEST_FILTER="test_$s" "$TEST"
done
job pre-det 38 env FLASHC_TEST_FILTER=test_deterministic_bitwise "$TEST"
job pre-strided 38 env FLASHC_TEST_FILTER=test_strided_stream_workspace "$TEST"
job pre-mods 38 env FLASHC_TEST_FILTER=test_modifiers "$TEST"
FAM=sm80 job sm80-bf16_d64 38 env FLASHC_TEST_FILTER=test_bf16_d64 "$TEST"
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s9_bwd10: tests took $((SECONDS - T0)) s"

# ---- 2. the preprocess: same bits, old vs new time (<= 25 s) ----
pre_out=$("${PY[@]}" timeout -k 2 25 python3 bench/gpu/bwd_pre.py --lib "$LIB" 2>&1)
[ $? -ne 0 ] && rc_all=1

# ---- 3. bench (the rest of the 110 s) ----
left=$((105 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
"${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
  --out "$OUT/bwd10.json" --dims 64,128 --seqlens 1024,2048,4096,16384 --budget-ms 40 \
  --configs flashc,flashc_det >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s9_bwd10: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (default family unless the prefix names one; mc-*: memcheck, short cases)"
echo "$summary"
echo "== preprocess (bwd_pre.py; r1 = FLASHC_CUDA_BWD_PRE=r1, the old launch shape)"
echo "$pre_out" | grep -E '^pre |Error|error' | head -12
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  grep -E '^\|' "$OUT/bench.log" | head -40
else
  echo "s9_bwd10: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi
echo "s9_bwd10: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
