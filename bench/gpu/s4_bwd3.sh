#!/usr/bin/env bash
# bench/gpu/s4_bwd3.sh BUILD_DIR — helper bwd3 (issue 12): the sm90v2 / sm90v2e / sm90v2s
# backward (src/cuda/attn_bwd_sm90v2.cu, opt-in: FLASHC_CUDA_BWD_KERNEL=<family>) on the H200,
# <= 90 s (sm90v2e and sm90v2s, d 64 only: their d 64 suites, graph, det bitwise, memcheck too):
#  1. tests/test_cuda_attn_bwd forced onto sm90v2, in parallel jobs: the d 128 and d 64 suites
#     (bf16 + fp16, MHA/GQA/MQA, causal, Sq > Sk rows that see no key, fast + deterministic),
#     the modifiers (windows, softcap, ALiBi, masked rows, det repeated bit for bit), the
#     deterministic bitwise test (d 128 and 64), the graph capture and strided/stream/workspace
#     cases; and compute-sanitizer memcheck on the short cases (FLASHC_TEST_SMALL=1) of d 128
#     bf16 and d 64 fp16;
#  2. bench/gpu/bench_bwd3.py: sm90 (old), sm90v2, sm80 at d 64, SDPA flash and cuDNN, fast and
#     deterministic, d 128 / 64, causal and not, S 2k and 16k (B*S 16k, hidden 2048).
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. Logs in
# $OUT (default BUILD_DIR/out-bwd3); a summary of the tests, then the bench table, printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(realpath "${1:?usage: s4_bwd3.sh BUILD_DIR}")
LIB=$B/libflashc.so
TEST=$B/tests/test_cuda_attn_bwd
[ -f "$LIB" ] || { echo "s4_bwd3: no $LIB"; exit 2; }
OUT=${OUT:-$B/out-bwd3}
mkdir -p "$OUT"
T0=$SECONDS
rc_all=0

# ---- 1. tests (<= 42 s wall, all jobs in parallel) ----
pids=() names=()
FAM=sm90v2
job() { # name, timeout, command... (under FLASHC_CUDA_BWD_KERNEL=$FAM)
  local n=$1 t=$2; shift 2
  ( timeout -k 2 "$t" env FLASHC_CUDA_BWD_KERNEL=$FAM OMP_NUM_THREADS=2 "$@" >"$OUT/$n.log" 2>&1
    echo $? >"$OUT/$n.rc" ) &
  pids+=($!) names+=("$n")
}
if [ -x "$TEST" ]; then
  for s in bf16_d128 f16_d128; do # the heaviest host references: 3 threads each
    job "t-$s" 40 env OMP_NUM_THREADS=3 FLASHC_TEST_FILTER="test_$s" "$TEST"
  done
  for s in bf16_d64 f16_d64; do
    job "t-$s" 40 env FLASHC_TEST_FILTER="test_$s" "$TEST"
  done
  job t-mods 40 env FLASHC_TEST_FILTER='test_modifiers' "$TEST"
  job t-det 40 env FLASHC_TEST_FILTER='test_deterministic_bitwise' "$TEST"
  job t-graph 40 env FLASHC_TEST_FILTER='test_graph_capture' "$TEST"
  job t-strided 40 env FLASHC_TEST_FILTER='test_strided_stream_workspace' "$TEST"
  # sm90v2e: d 64 only (d 128 falls back to the dispatcher's sm90 under it)
  FAM=sm90v2e
  for s in bf16_d64 f16_d64; do
    job "e-$s" 40 env FLASHC_TEST_FILTER="test_$s" "$TEST"
  done
  job e-graph 40 env FLASHC_TEST_FILTER='test_graph_capture' "$TEST"
  job e-det 40 env FLASHC_TEST_FILTER='test_deterministic_bitwise' "$TEST"
  if command -v compute-sanitizer >/dev/null; then
    job mc-e-d64 40 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER='test_bf16_d64' \
      compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$TEST"
  fi
  # sm90v2s: d 64 only, one warpgroup per block, two blocks per SM
  FAM=sm90v2s
  for s in bf16_d64 f16_d64; do
    job "s-$s" 40 env FLASHC_TEST_FILTER="test_$s" "$TEST"
  done
  job s-graph 40 env FLASHC_TEST_FILTER='test_graph_capture' "$TEST"
  job s-det 40 env FLASHC_TEST_FILTER='test_deterministic_bitwise' "$TEST"
  job s-mods 40 env FLASHC_TEST_FILTER='test_modifiers' "$TEST"
  if command -v compute-sanitizer >/dev/null; then
    job mc-s-d64 40 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER='test_f16_d64' \
      compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$TEST"
  fi
  FAM=sm90v2
  if command -v compute-sanitizer >/dev/null; then
    job mc-d128 40 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER='test_bf16_d128' \
      compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$TEST"
    job mc-d64 40 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER='test_f16_d64' \
      compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$TEST"
  else
    echo "s4_bwd3: no compute-sanitizer on PATH: memcheck not run"
  fi
else
  echo "s4_bwd3: no $TEST (build with tests on): tests not run"
fi
for p in "${pids[@]}"; do wait "$p"; done
summary=$(for n in "${names[@]}"; do
  rc=$(cat "$OUT/$n.rc" 2>/dev/null || echo '?')
  cases=$(grep -cE ': dq |bit-identical' "$OUT/$n.log" 2>/dev/null)
  pass=$(grep -E '\[  PASSED  \]' "$OUT/$n.log" | tail -1 | sed 's/.*PASSED  \] *//')
  fail=$(grep -E '\[  FAILED  \]|\[  ERROR   \]' "$OUT/$n.log" | head -3 | tr '\n' ' ')
  errs=$(grep -E 'ERROR SUMMARY' "$OUT/$n.log" | tail -1)
  echo "$n: rc $rc; $cases cases; passed: ${pass:-?} ${fail:+FAILED: $fail}${errs:+; $errs}"
  [ "$rc" = 0 ] || echo "  last lines: $(grep -vE '^\[ (RUN|       OK) ' "$OUT/$n.log" | tail -4 | tr '\n' ' ' | cut -c1-600)"
done)
grep -q 'rc [^0]' <<<"$summary" && rc_all=1
echo "s4_bwd3: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of the 90 s, at most 44 s) ----
left=$((88 - (SECONDS - T0)))
[ $left -gt 44 ] && left=44
FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_bwd3.py --lib "$LIB" --out "$OUT/bwd3.json" \
  >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s4_bwd3: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90v2; e-*: sm90v2e, s-*: sm90v2s; mc-*: memcheck)"
echo "$summary"
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
  sed -n '/^bwd alone/,$p' "$OUT/bench.log"
else
  echo "s4_bwd3: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi
echo "s4_bwd3: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
