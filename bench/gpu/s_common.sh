# bench/gpu/s_common.sh — sourced by the device scripts (s6_*.sh): parallel jobs under hard
# timeouts, each with its log and exit code in $OUT, and a one-line-per-job summary.
# Needs OUT set. Usage:
#   FAM=sm90v3w job NAME SECONDS CMD...   # runs CMD under FLASHC_CUDA_BWD_KERNEL=$FAM (if set)
#   wait_jobs; jobs_summary               # prints "NAME: rc R; N cases; passed: ..." lines
#   jobs_failed                           # exit status 0 iff some job's rc was not 0
#   tests_done NAME                       # wait_jobs, rc_all=1 on a failure, the time, the summary
. "$(dirname "${BASH_SOURCE[0]}")/prebuilt.sh"
s_pids=() s_names=()

job() { # name, timeout (s), command... ; FAM (optional): FLASHC_CUDA_BWD_KERNEL
  local n=$1 t=$2; shift 2
  ( timeout -k 2 "$t" env ${FAM:+FLASHC_CUDA_BWD_KERNEL=$FAM} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} \
      "$@" >"$OUT/$n.log" 2>&1
    echo $? >"$OUT/$n.rc" ) &
  s_pids+=($!) s_names+=("$n")
}

# tjob NAME SECONDS TOOL [VAR=VALUE...] — job NAME: $TEST (a test binary) with the VARs set, under
# compute-sanitizer's TOOL (memcheck, racecheck, synccheck, initcheck) or none ("" or -). The
# forward scripts' tst() map their positional arguments onto it.
tjob() {
  local n=$1 t=$2 tool=$3 san=()
  shift 3
  [ -n "$tool" ] && [ "$tool" != - ] &&
    san=(compute-sanitizer --tool "$tool" --error-exitcode 9 --report-api-errors no)
  job "$n" "$t" env "$@" "${san[@]}" "$TEST"
}

wait_jobs() {
  local p
  for p in "${s_pids[@]}"; do wait "$p"; done
}

# One line a job: its rc (124: timed out), the cmocka pass/fail lines, the sanitizer summary;
# for a job that failed, its last lines; for a sanitizer hazard, the first sites it printed.
jobs_summary() {
  local n rc cases pass fail errs
  for n in "${s_names[@]}"; do
    rc=$(cat "$OUT/$n.rc" 2>/dev/null || echo '?')
    cases=$(grep -cE ': dq |bit-identical' "$OUT/$n.log" 2>/dev/null)
    pass=$(grep -E '\[  PASSED  \]' "$OUT/$n.log" | tail -1 | sed 's/.*PASSED  \] *//')
    fail=$(grep -E '\[  FAILED  \]|\[  ERROR   \]' "$OUT/$n.log" | head -3 | tr '\n' ' ')
    errs=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$n.log" | tail -1)
    echo "$n: rc $rc; $cases cases; passed: ${pass:-?} ${fail:+FAILED: $fail}${errs:+; $errs}"
    if [ "$rc" != 0 ]; then
      grep -E 'Race reported|(Read|Write) access at|[Bb]arrier|Invalid' "$OUT/$n.log" |
        sed -e 's/^========= *//' -e 's/(CUtensorMap_st[^)]*)//g' -e 's/attn_bwd_args//g' |
        head -16 | cut -c1-220
      echo "  last lines: $(grep -vE '^\[ (RUN|       OK) ' "$OUT/$n.log" | tail -6 | tr '\n' ' ' | cut -c1-900)"
    fi
  done
}

# The forward scripts' summary of their test_cuda_attn jobs (s9_fwd15, s9_fwd16, s10_fwd17):
# one line a job with its rc (124: timed out), cases run, "not served" lines (LABEL, default
# "not served"), the cmocka pass/fail counts and the sanitizer summary; the test's per-head-dim
# "D=..: N cases ran" lines where it printed any; for a job that failed, cmocka's failure lines
# and the sanitizer's first sites.
fwd_jobs_summary() {
  local label=${1:-not served} n log rc ns
  for n in "${s_names[@]}"; do
    log=$OUT/$n.log rc=$(cat "$OUT/$n.rc" 2>/dev/null || echo '?')
    echo "$n: rc $rc$([ "$rc" = 124 ] && echo ' (timed out)'), $(grep -c ': o err' "$log") cases," \
      "$(grep -c 'not served' "$log") $label, $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$log" |
        tr '\n' ' ')$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sed 's/^========= //')"
    ns=$(grep -E 'D=[0-9]+: [0-9]+ cases ran' "$log" | sed -E 's/^ *//; s/ by FLASHC.*//' | tr '\n' ';')
    [ -n "$ns" ] && echo "    ${ns:0:400}"
    if [ "$rc" != 0 ]; then
      grep -E '^\[ +(ERROR|FAILED|LINE) +\]|^\[ RUN|Invalid|Race reported|(Read|Write) access' "$log" |
        grep -vE 'FAILED  \] [0-9]' | tail -8 | cut -c1-240 | sed 's/^/    /'
    fi
  done
}

# fwd11_bench CAP ARG... — bench/gpu/bench_fwd11.py (or $BENCH_PY, a script taking the same
# --lib / --rep-ms / --out) on $LIB with ARG... (its --set, --rounds, --alt ...), under the
# script's time left (left(), at most CAP seconds; skipped under 15), with FLASHC_CUDA_KERNEL and
# FLASHC_CUDA_SM90_PAD unset for the default instance, writing $OUT/bench.json and
# $OUT/bench.log; sets rc and prints its line and the log's errors.
fwd11_bench() {
  local tb cap=$1
  shift
  tb=$(left)
  [ "$tb" -gt "$cap" ] && tb=$cap
  if [ "$tb" -gt 15 ]; then
    env -u FLASHC_CUDA_SM90_PAD -u FLASHC_CUDA_KERNEL FLASHC_LIBRARY="$LIB" \
      PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
      timeout -k 2 "$tb" python3 "${BENCH_PY:-bench/gpu/bench_fwd11.py}" --lib "$LIB" "$@" \
      --rep-ms "${FLASHC_REP_MS:-20}" --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
    rc=$?
  else
    echo "no time left for the bench" >"$OUT/bench.log"
    rc=1
  fi
  echo "bench rc $rc$([ "$rc" = 124 ] && echo ' (timed out)') (+$(($(date +%s) - T0)) s)"
  grep -E 'WRONG|Error|error|Traceback|^device' "$OUT/bench.log" | cut -c1-240 | head -8
}

# The host CPU of a CPU-lane script (s8_amx7, s9_amx9), into $OUT/machine.txt: the date, the
# model, cores, clocks and caches, and the matrix-unit flags the kernels dispatch on.
s_machine() {
  {
    date -u
    lscpu | grep -E 'Model name|^CPU\(s\)|MHz|L1d|L2'
    grep -o -w -E 'amx_tile|amx_bf16|avx512_bf16' /proc/cpuinfo | sort | uniq -c
  } >"$OUT/machine.txt" 2>&1
}

# tests_done NAME — after the tjobs: waits for them, sets rc_all=1 if one failed, prints how
# long they took since T0 and their summary lines.
tests_done() {
  wait_jobs
  jobs_failed && rc_all=1
  echo "$1: tests took $((SECONDS - T0)) s"
  jobs_summary
}

jobs_failed() {
  local n
  for n in "${s_names[@]}"; do
    [ "$(cat "$OUT/$n.rc" 2>/dev/null)" = 0 ] || return 0
  done
  return 1
}

# s_begin NAME BUILD_DIR [FILE...] — the preamble of every device script, called from the
# repository root right after sourcing this file: B = BUILD_DIR made absolute, LIB = its
# libflashc.so, OUT = $OUT or $B/out-NAME (created); exits 2 if LIB or a FILE (relative to B)
# is missing.
s_begin() {
  local name=$1 f
  B=$(realpath "${2:?usage: $name BUILD_DIR}") || exit 2
  shift 2
  LIB=$B/libflashc.so
  prebuilt_unpack "$B" || exit 2 # a packed prebuild: unpacked once
  for f in libflashc.so "$@"; do [ -e "$B/$f" ] || { echo "$name: no $B/$f"; exit 2; }; done
  OUT=${OUT:-$B/out-$name}
  mkdir -p "$OUT"
}

# s_scratch NAME — the backward scripts' preamble after s_begin: PY = env running python with
# $LIB and python/ on the path, unbuffered; FINAL = $OUT; OUT = a scratch folder for the job logs
# (few files come back from a device call). s_pack FILE... copies FILEs into $FINAL and the
# scratch folder into $FINAL/logs.tgz.
s_scratch() {
  PY=(env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1)
  FINAL=$OUT
  OUT=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 2
}
s_pack() {
  cp "$@" "$FINAL/" 2>/dev/null
  tar -czf "$FINAL/logs.tgz" -C "$OUT" . 2>/dev/null
}

# bwd_bench NAME CAP ARG... — bench/gpu/bench_bwd4.py on $LIB with ARG... under what is left of
# CAP seconds since T0 (at least 5), writing $OUT/NAME.json and $OUT/bench.log (after s_scratch:
# uses PY); sets brc, and rc_all=1 if the bench failed or timed out (said so).
bwd_bench() {
  local name=$1 left=$(($2 - (SECONDS - T0)))
  shift 2
  [ $left -lt 5 ] && left=5
  "${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
    --out "$OUT/$name.json" "$@" >"$OUT/bench.log" 2>&1
  brc=$?
  [ $brc -eq 124 ] && echo "$name: bench TIMED OUT after $left s (partial table below)"
  [ $brc -ne 0 ] && rc_all=1
  return 0
}
