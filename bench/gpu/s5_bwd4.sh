#!/usr/bin/env bash
# bench/gpu/s5_bwd4.sh BUILD_DIR — helper bwd4 (issue 12), <= 90 s on the H200:
#  1. tests/test_cuda_attn_bwd forced onto sm90v3 and sm90v3t (src/cuda/attn_bwd_sm90v3.cu: the
#     warp-specialised d 128 backward, TMA producer + 2 consumer warpgroups; v3t: dQ by tensor
#     reduce-adds; v3q: v3t with dV, dK after dQ): the d 128 suites
#     (bf16, fp16: MHA/GQA/MQA, causal, windows, rows that see no key, fast + deterministic),
#     the modifiers (softcap, ALiBi, windows; d 128 among them), deterministic bitwise, strided
#     operands; compute-sanitizer memcheck on the short d 128 case;
#  2. bench/gpu/bench_bwd4.py: sm90v3, sm90v3t, sm90v3q fast and deterministic against the dispatcher's choice
#     (sm90 at d 128, sm90v2s at d 64) and SDPA flash and cuDNN, same process; causal and not,
#     S 2k and 16k (B*S 16k, hidden 2048), d 128 and 64.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. Logs in
# $OUT (default BUILD_DIR/out-bwd4); the test summary, then the bench table, printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$(realpath "${1:?usage: s5_bwd4.sh BUILD_DIR}")
LIB=$B/libflashc.so
TEST=$B/tests/test_cuda_attn_bwd
[ -f "$LIB" ] || { echo "s5_bwd4: no $LIB"; exit 2; }
OUT=${OUT:-$B/out-bwd4}
mkdir -p "$OUT"
T0=$SECONDS
rc_all=0

# ---- 1. tests (<= 40 s wall, all jobs in parallel) ----
pids=() names=()
FAM=sm90v3
job() { # name, timeout, command... (under FLASHC_CUDA_BWD_KERNEL=$FAM)
  local n=$1 t=$2; shift 2
  ( timeout -k 2 "$t" env FLASHC_CUDA_BWD_KERNEL=$FAM OMP_NUM_THREADS=2 "$@" >"$OUT/$n.log" 2>&1
    echo $? >"$OUT/$n.rc" ) &
  pids+=($!) names+=("$n")
}
if [ -x "$TEST" ]; then
  for FAM in sm90v3 sm90v3t; do
    f=${FAM#sm90}
    for s in bf16_d128 f16_d128; do # the heaviest host references: 3 threads each
      job "$f-$s" 38 env OMP_NUM_THREADS=3 FLASHC_TEST_FILTER="test_$s" "$TEST"
    done
    job $f-mods 38 env FLASHC_TEST_FILTER='test_modifiers' "$TEST"
    job $f-det 38 env FLASHC_TEST_FILTER='test_deterministic_bitwise' "$TEST"
    job $f-strided 38 env FLASHC_TEST_FILTER='test_strided_stream_workspace' "$TEST"
    if command -v compute-sanitizer >/dev/null; then
      job mc-$f-d128 38 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER='test_bf16_d128' \
        compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$TEST"
    else
      echo "s5_bwd4: no compute-sanitizer on PATH: memcheck not run"
    fi
  done
  # sm90v3q: sm90v3t with dV, dK after dQ (the same code otherwise): fewer suites
  FAM=sm90v3q
  job v3q-bf16_d128 38 env OMP_NUM_THREADS=3 FLASHC_TEST_FILTER="test_bf16_d128" "$TEST"
  job v3q-mods 38 env FLASHC_TEST_FILTER='test_modifiers' "$TEST"
  job v3q-det 38 env FLASHC_TEST_FILTER='test_deterministic_bitwise' "$TEST"
  command -v compute-sanitizer >/dev/null &&
    job mc-v3q-d128 38 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER='test_f16_d128' \
      compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$TEST"
else
  echo "s5_bwd4: no $TEST (build with tests on): tests not run"
fi
for p in "${pids[@]}"; do wait "$p"; done
summary=$(for n in "${names[@]}"; do
  rc=$(cat "$OUT/$n.rc" 2>/dev/null || echo '?')
  cases=$(grep -cE ': dq |bit-identical' "$OUT/$n.log" 2>/dev/null)
  pass=$(grep -E '\[  PASSED  \]' "$OUT/$n.log" | tail -1 | sed 's/.*PASSED  \] *//')
  fail=$(grep -E '\[  FAILED  \]|\[  ERROR   \]' "$OUT/$n.log" | head -3 | tr '\n' ' ')
  errs=$(grep -E 'ERROR SUMMARY' "$OUT/$n.log" | tail -1)
  echo "$n: rc $rc; $cases cases; passed: ${pass:-?} ${fail:+FAILED: $fail}${errs:+; $errs}"
  [ "$rc" = 0 ] || echo "  last lines: $(grep -vE '^\[ (RUN|       OK) ' "$OUT/$n.log" | tail -6 | tr '\n' ' ' | cut -c1-900)"
done)
grep -q 'rc [^0]' <<<"$summary" && rc_all=1
echo "s5_bwd4: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of the 90 s) ----
left=$((88 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" --out "$OUT/bwd4.json" \
  >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s5_bwd4: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90v3 (v3-*), sm90v3t (v3t-*), sm90v3q (v3q-*); mc-*: memcheck)"
echo "$summary"
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
  sed -n '/^bwd alone/,$p' "$OUT/bench.log"
else
  echo "s5_bwd4: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi
echo "s5_bwd4: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
