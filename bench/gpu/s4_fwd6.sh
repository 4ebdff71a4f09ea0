#!/usr/bin/env bash
# bench/gpu/s4_fwd6.sh BUILD_DIR — the Hopper forward's v6 and v7 families (issue 11: a dynamic
# tile scheduler on a persistent grid, O by TMA store; v7: 3 consumers at d 64), <= 45 s of wall
# time in all:
#   1. (<= 21 s, concurrently: correctness only) tests/test_cuda_attn, short cases
#      (FLASHC_TEST_SMALL=1; test_many_tiles, test_graph_replay, test_repeatable and the strided
#      cases run whole), with FLASHC_CUDA_KERNEL forced to sm90v6 (dims 64, 128), sm90v7 (d 64)
#      and the default kernels sm90v4w and sm90v5, whose code v6 shares; compute-sanitizer
#      memcheck and racecheck of sm90v6 on the fixed tests only (FLASHC_TEST_DIMS=0)
#   2. (<= 22 s, alone on the GPU) bench_sdpa.py --kernels with the families whose tests passed
#      (of sm90v4w, sm90v5, sm90v6, sm90v7), SDPA flash and cuDNN in the same process, d 64/128,
#      causal and not, seqlens 1k/4k/16k; the table last
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
# Logs in $OUT (default BUILD_DIR/out-fwd6); what matters is printed (failing lines included).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s4_fwd6.sh BUILD_DIR}
B=$(realpath "$B")
lib=$B/libflashc.so TEST=$B/tests/test_cuda_attn
[ -f "$lib" ] && [ -x "$TEST" ] || { echo "s4_fwd6: $lib or $TEST not found"; exit 2; }
OUT=${OUT:-$B/out-fwd6}
mkdir -p "$OUT"
T0=$(date +%s)

pids=()
tst() { # family dims omp
  FLASHC_CUDA_KERNEL=$1 FLASHC_TEST_SMALL=1 OMP_NUM_THREADS=$3 FLASHC_TEST_DIMS=$2 \
    timeout -k 1 20 "$TEST" >"$OUT/tests-$1.log" 2>&1 &
  pids+=("$!:tests-$1")
}
san() { # family tool
  FLASHC_CUDA_KERNEL=$1 FLASHC_TEST_SMALL=1 FLASHC_TEST_DIMS=0 OMP_NUM_THREADS=1 \
    timeout -k 1 20 compute-sanitizer --tool "$2" --error-exitcode 9 --report-api-errors no \
    "$TEST" >"$OUT/san-$2-$1.log" 2>&1 &
  pids+=("$!:san-$2-$1")
}
tst sm90v6 64,128 4
tst sm90v7 64 3
tst sm90v4w 64,128 2
tst sm90v5 64,128 2
san sm90v6 memcheck
san sm90v6 racecheck
passed=()
summary=()
for pr in "${pids[@]}"; do
  pid=${pr%%:*} what=${pr#*:}
  wait "$pid"; rc=$?
  log=$OUT/$what.log
  case $what in
    tests-*)
      k=${what#tests-}
      line="$what: rc $rc, $(grep -c ': o err' "$log") cases, $(grep -c 'not served' "$log") not served, $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$log" | tr '\n' ' ')"
      if [ $rc = 0 ]; then passed+=("$k"); else
        line="$line
    last test: $(grep -E '^\[ RUN' "$log" | tail -1)
    $(grep -iE 'fail|error|assert|mismatch|differ|0x' "$log" | grep -v 'pending\|^\[' | head -4)"
      fi;;
    san-*)
      line="$what: rc $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)  \] [0-9]' "$log" | tr '\n' ' ')"
      [ $rc = 0 ] || line="$line
    last test: $(grep -E '^\[ RUN' "$log" | tail -1)
    $(grep -E '^========= (Error|Warning|Race|    at|Invalid|  )' "$log" | head -8)";;
  esac
  summary+=("$line")
done
echo "(tests +$(($(date +%s) - T0)) s)"

kern=
for k in "${passed[@]}"; do kern="$kern${kern:+,}$k"; done
if [ -n "$kern" ]; then
  FLASHC_LIBRARY="$lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    timeout -k 1 22 python3 bench/gpu/bench_sdpa.py --lib "$lib" --kernels "$kern" \
    --dims 64,128 --seqlens 1024,4096,16384 --rep-ms "${FLASHC_REP_MS:-15}" \
    --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  rc=$?
else
  echo "no family passed its tests: no bench" >"$OUT/bench.log"
  rc=1
fi
echo "bench ($kern) rc $rc (+$(($(date +%s) - T0)) s)"
printf '%s\n' "${summary[@]}"
if grep -q '^bf16 fwd TFLOP' "$OUT/bench.log"; then
  sed -n '/^bf16 fwd TFLOP/,$p' "$OUT/bench.log"
else # timed out or failed: the rows printed so far
  grep -E '^(conv|llama) |WRONG|Error|error' "$OUT/bench.log" | cut -c1-220 | tail -14
fi
exit $rc
