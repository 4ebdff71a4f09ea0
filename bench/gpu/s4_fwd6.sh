#!/usr/bin/env bash
# bench/gpu/s4_fwd6.sh BUILD_DIR — the Hopper forward's v6 families (issue 11: the dynamic tile
# scheduler on a persistent grid, O by TMA store), <= 90 s of wall time in all:
#   1. (<= 45 s, concurrently: correctness only) tests/test_cuda_attn with FLASHC_CUDA_KERNEL
#      forced to sm90v6, sm90v6d and sm90v6w (dims 64 and 128, the ones they serve) and sm90v7
#      (d 64 only): the full suite, test_many_tiles's 512-tile and empty-tile cases included;
#      the short cases (FLASHC_TEST_SMALL=1) of the default kernels sm90v4w and sm90v5, whose
#      code v6 shares (a changed tile loop, kernel parameters); compute-sanitizer memcheck and
#      racecheck on the short cases of sm90v6 and sm90v7
#   2. (<= 40 s, alone on the GPU) bench_sdpa.py --kernels sm90v4w,sm90v5 and every v6/v7
#      family (the bench checks each against SDPA-flash before timing it; a family whose tests
#      failed is marked in the summary) with SDPA flash and cuDNN in the same process, d 64/128,
#      causal and not, seqlens 1k/4k/16k; the table last
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
# Logs in $OUT (default BUILD_DIR/out-fwd6).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s4_fwd6.sh BUILD_DIR}
B=$(realpath "$B")
lib=$B/libflashc.so TEST=$B/tests/test_cuda_attn
[ -f "$lib" ] && [ -x "$TEST" ] || { echo "s4_fwd6: $lib or $TEST not found"; exit 2; }
OUT=${OUT:-$B/out-fwd6}
mkdir -p "$OUT"
T0=$(date +%s)
FAMS="sm90v6 sm90v6d sm90v6w sm90v7"

echo "=== tests and sanitizers (concurrently)"
pids=()
for k in $FAMS; do
  dims=64,128; [ $k = sm90v7 ] && dims=64
  FLASHC_CUDA_KERNEL=$k OMP_NUM_THREADS=3 FLASHC_TEST_DIMS=$dims timeout -k 2 44 "$TEST" \
    >"$OUT/tests-$k.log" 2>&1 &
  pids+=("$!:tests-$k")
done
for k in sm90v4w sm90v5; do
  FLASHC_CUDA_KERNEL=$k FLASHC_TEST_SMALL=1 OMP_NUM_THREADS=2 FLASHC_TEST_DIMS=64,128 \
    timeout -k 2 44 "$TEST" >"$OUT/tests-$k-small.log" 2>&1 &
  pids+=("$!:tests-$k-small")
done
san() { # family tool
  FLASHC_CUDA_KERNEL=$1 FLASHC_TEST_SMALL=1 FLASHC_TEST_DIMS=64,128 OMP_NUM_THREADS=1 \
    timeout -k 2 44 compute-sanitizer --tool "$2" --error-exitcode 9 --report-api-errors no \
    "$TEST" >"$OUT/san-$2-$1.log" 2>&1 &
  pids+=("$!:san-$2-$1")
}
san sm90v6 memcheck
san sm90v6 racecheck
san sm90v7 memcheck
san sm90v7 racecheck
passed=()
summary=()
for pr in "${pids[@]}"; do
  pid=${pr%%:*} what=${pr#*:}
  wait "$pid"; rc=$?
  log=$OUT/$what.log
  case $what in
    tests-*)
      k=${what#tests-}
      line="$what: rc $rc, $(grep -c ': o err' "$log") cases, $(grep -c 'not served' "$log") not served, $(grep -E '^\[  (PASSED|FAILED)' "$log" | tr '\n' ' ')"
      [ $rc = 0 ] && passed+=("$k") || line="$line | $(grep -E 'FAIL|error|Assert' "$log" | head -3 | tr '\n' ' ')";;
    san-*)
      line="$what: rc $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$log" | tr '\n' ' ')";;
  esac
  summary+=("$line")
  echo "$line"
done
echo "(+$(($(date +%s) - T0)) s)"

echo "=== bench (alone on the GPU); tests passed: ${passed[*]:-none}"
kern=sm90v4w,sm90v5; for k in $FAMS; do kern="$kern,$k"; done
FLASHC_LIBRARY="$lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
  timeout -k 2 40 python3 bench/gpu/bench_sdpa.py --lib "$lib" --kernels "$kern" \
  --dims 64,128 --seqlens 1024,4096,16384 --rep-ms "${FLASHC_REP_MS:-25}" \
  --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
rc=$?
echo "bench rc $rc (+$(($(date +%s) - T0)) s)"
[ $rc = 0 ] || tail -20 "$OUT/bench.log"
echo
printf '%s\n' "${summary[@]}"
sed -n '/^bf16 fwd TFLOP/,$p' "$OUT/bench.log"
exit $rc
