#!/usr/bin/env bash
# bench/gpu/s5_fwd7.sh BUILD_DIR — issue 11, the Hopper forward (round 2): the new defaults on
# compute capability 9.0 (v6 at d 128 from seqlen 1k; v7 at d 64 from 1k without the mask, from
# 2k under it) and the opt-in sm90v8 (non-causal pairs sharing K/V by multicast) and sm90v6n
# (v6 with 128-key blocks without the mask too), <= 90 s of wall time in all (every step under
# `timeout`, a global deadline):
#   1. (<= 45 s, concurrently; correctness only) tests/test_cuda_attn with the default dispatch:
#      the full cases of d 128 and d 64, both dtypes (the 1k pairs and (20000, 16) are where the
#      new defaults run: v6 at d 128, v7 at d 64 without the mask), and every fixed test on the
#      short cases; forced sm90v6, sm90v7, sm90v8, sm90v6n on the short cases;
#      compute-sanitizer memcheck (fixed tests, short), racecheck and synccheck (test_many_tiles'
#      short cases: > 132 tiles through the counter or the pairs' walk, empty causal tiles) on
#      sm90v6 and sm90v7, memcheck and racecheck on sm90v8
#   2. (<= 47 s, alone on the GPU) bench_sdpa.py --kernels default (the dispatcher's choice) and
#      the forced families whose tests passed, main's former defaults sm90v4w / sm90v5 beside
#      them (FWD7_KERNELS adds more), SDPA flash and cuDNN in the same process, d 64/128, causal
#      and not, seqlens 1k/2k/4k/16k, 25 ms of timing per cell; the table last
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
# Logs in $OUT (default BUILD_DIR/out-fwd7); what matters is printed, failing lines included.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s5_fwd7.sh BUILD_DIR}
B=$(realpath "$B")
lib=$B/libflashc.so TEST=$B/tests/test_cuda_attn
[ -f "$lib" ] && [ -x "$TEST" ] || { echo "s5_fwd7: $lib or $TEST not found"; exit 2; }
OUT=${OUT:-$B/out-fwd7}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((88 - ($(date +%s) - T0))); } # seconds left of the 90

pids=()
tst() { # name family dims small omp timeout [only-tests]
  FLASHC_CUDA_KERNEL=$2 FLASHC_TEST_SMALL=$4 OMP_NUM_THREADS=$5 FLASHC_TEST_DIMS=$3 \
    FLASHC_TEST_ONLY=${7:-} timeout -k 1 "$6" "$TEST" >"$OUT/tests-$1.log" 2>&1 &
  pids+=("$!:tests-$1")
}
san() { # family tool only-tests timeout
  FLASHC_CUDA_KERNEL=$1 FLASHC_TEST_SMALL=1 FLASHC_TEST_DIMS=0 FLASHC_TEST_ONLY=$3 \
    OMP_NUM_THREADS=1 timeout -k 1 "$4" compute-sanitizer --tool "$2" --error-exitcode 9 \
    --report-api-errors no "$TEST" >"$OUT/san-$2-$1.log" 2>&1 &
  pids+=("$!:san-$2-$1")
}
for d in 128 64; do
  for t in bf16 fp16; do tst default-$t-d$d "" $d 0 3 45 test_${t}_d$d; done
done
tst default "" 64,128 1 1 40
tst sm90v6 sm90v6 64,128 1 2 40
tst sm90v7 sm90v7 64 1 2 40
tst sm90v8 sm90v8 64,128 1 1 40
tst sm90v6n sm90v6n 64,128 1 1 40
for k in sm90v6 sm90v7; do
  san $k memcheck "" 36
  san $k racecheck test_many_tiles 36
  san $k synccheck test_many_tiles 30
done
san sm90v8 memcheck "" 36
san sm90v8 racecheck test_many_tiles 36
declare -A bad=() # family (or "default") -> a test run of it failed
ran=()
summary=()
for pr in "${pids[@]}"; do
  pid=${pr%%:*} what=${pr#*:}
  wait "$pid"; rc=$?
  log=$OUT/$what.log
  case $what in
    tests-*)
      k=${what#tests-} fam=${k%%-*}
      ran+=("$fam")
      line="$what: rc $rc, $(grep -c ': o err' "$log") cases, $(grep -c 'not served' "$log") not served, $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$log" | tr '\n' ' ')"
      if [ $rc != 0 ]; then
        bad[$fam]=1
        line="$line
    last test: $(grep -E '^\[ RUN' "$log" | tail -1)
    $(grep -iE 'fail|error|assert|mismatch|differ|0x|no test' "$log" | grep -v 'pending\|^\[' | head -4)"
      fi;;
    san-*)
      line="$what: rc $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)  \] [0-9]' "$log" | tr '\n' ' ')"
      [ $rc = 0 ] || line="$line
    last test: $(grep -E '^\[ RUN' "$log" | tail -1)
    $(grep -E '^========= (Error|Warning|Race|Barrier|    at|Invalid|  )' "$log" | head -8)";;
  esac
  summary+=("$line")
done
passed=()
for f in "${ran[@]}"; do
  [ -z "${bad[$f]:-}" ] && [[ " ${passed[*]} " != *" $f "* ]] && passed+=("$f")
done
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"

kern=
for k in "${passed[@]}" sm90v4w sm90v5 ${FWD7_KERNELS:+${FWD7_KERNELS//,/ }}; do kern="$kern${kern:+,}$k"; done
tb=$(left)
[ "$tb" -gt 47 ] && tb=47
if [ "$tb" -gt 8 ]; then
  FLASHC_LIBRARY="$lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    timeout -k 1 "$tb" python3 bench/gpu/bench_sdpa.py --lib "$lib" --kernels "$kern" \
    --dims 64,128 --seqlens 1024,2048,4096,16384 --rep-ms "${FLASHC_REP_MS:-25}" \
    --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  rc=$?
else
  echo "no time left for the bench" >"$OUT/bench.log"
  rc=1
fi
echo "bench ($kern) rc $rc (+$(($(date +%s) - T0)) s)"
printf '%s\n' "${summary[@]}"
if grep -q '^bf16 fwd TFLOP' "$OUT/bench.log"; then
  sed -n '/^bf16 fwd TFLOP/,$p' "$OUT/bench.log"
else # timed out or failed: the rows printed so far
  grep -E '^(conv|llama) |WRONG|Error|error' "$OUT/bench.log" | cut -c1-240 | tail -14
fi
exit $rc
